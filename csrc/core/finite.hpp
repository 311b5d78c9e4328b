// Python-free check that a float buffer holds no NaN or infinity.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rapidscore {

// What one pass over a float buffer finds: the index of its first NaN or infinity (n when every
// value is finite) and, when all are finite, the largest magnitude.
struct FloatScan {
    std::size_t first_non_finite;
    float max_abs;
};

// A value is non-finite exactly when its exponent bits are all ones, and for finite floats the
// order of |x| is the order of the bits of |x| read as an unsigned integer. Taking the maximum of
// those bits in branch-free blocks lets the compiler vectorise the scan, which then runs at
// memory speed; std::isfinite per element does not vectorise and cost more than the matching
// itself on 1,000 short pairs.
inline FloatScan scan_floats(const float* p, std::size_t n) {
    constexpr std::size_t kBlock = 4096;
    constexpr std::uint32_t kExponent = 0x7f800000u, kMagnitude = 0x7fffffffu;
    std::uint32_t largest = 0;
    for (std::size_t start = 0; start < n; start += kBlock) {
        const std::size_t end = std::min(n, start + kBlock);
        std::uint32_t block = 0;
        for (std::size_t i = start; i < end; ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, p + i, sizeof bits);
            bits &= kMagnitude;
            block = bits > block ? bits : block;
        }
        if (block >= kExponent) {
            for (std::size_t i = start; i < end; ++i)
                if (!std::isfinite(p[i])) return {i, 0.0f};
        }
        largest = block > largest ? block : largest;
    }
    float max_abs;
    std::memcpy(&max_abs, &largest, sizeof max_abs);
    return {n, max_abs};
}

// Index of the first NaN or infinity in p[0, n), or n when every value is finite.
inline std::size_t first_non_finite(const float* p, std::size_t n) { return scan_floats(p, n).first_non_finite; }

// The largest squared L2 norm a row may have for float32 dot products of such rows to stay
// finite: |<a, b>| <= |a| |b| (Cauchy-Schwarz), and every partial sum of the products is bounded
// by the same sum of magnitudes; a quarter of FLT_MAX leaves room for the rounding of long sums.
// Unit rows (what BERTScore matches) are 8.5e37 times below it.
constexpr double kMaxRowSquaredNorm = 3.4028234663852886e38 / 4;

// The first row of a finite rows x dim matrix whose squared L2 norm (computed in double, which
// cannot overflow for float inputs) exceeds kMaxRowSquaredNorm, or rows when none does; that
// row's squared norm goes to *squared_norm. max_abs (from scan_floats) gives a quick answer for
// the usual matrix: dim * max_abs^2 within the bound means every row is.
inline std::size_t first_oversized_row(const float* p, std::size_t rows, std::size_t dim, float max_abs,
                                       double* squared_norm) {
    const double largest = static_cast<double>(max_abs);
    if (static_cast<double>(dim) * largest * largest <= kMaxRowSquaredNorm) return rows;
    for (std::size_t r = 0; r < rows; ++r) {
        double sum = 0.0;
        const float* row = p + r * dim;
        for (std::size_t k = 0; k < dim; ++k) sum += static_cast<double>(row[k]) * row[k];
        if (sum > kMaxRowSquaredNorm) {
            *squared_norm = sum;
            return r;
        }
    }
    return rows;
}

}  // namespace rapidscore

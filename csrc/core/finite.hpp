// Python-free check that a float buffer holds no NaN or infinity.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rapidscore {

// Index of the first NaN or infinity in p[0, n), or n when every value is finite.
// A value is non-finite exactly when its exponent bits are all ones. Testing that with integer
// ops in branch-free blocks lets the compiler vectorise the scan, which then runs at memory
// speed; std::isfinite per element does not vectorise and cost more than the matching itself
// on 1,000 short pairs.
inline std::size_t first_non_finite(const float* p, std::size_t n) {
    constexpr std::size_t kBlock = 4096;
    constexpr std::uint32_t kExponent = 0x7f800000u;
    for (std::size_t start = 0; start < n; start += kBlock) {
        const std::size_t end = std::min(n, start + kBlock);
        std::uint32_t any = 0;
        for (std::size_t i = start; i < end; ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, p + i, sizeof bits);
            any |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
        }
        if (any) {
            for (std::size_t i = start; i < end; ++i)
                if (!std::isfinite(p[i])) return i;
        }
    }
    return n;
}

}  // namespace rapidscore

// Python-free paired resampling for rapidscore.compare: bootstrap column sums and approximate
// randomization swap sums, both from a counter-based SplitMix64 stream that numpy reproduces
// (python/rapidscore/kernels/resampling_py.py is the twin; every rule below is mirrored there
// bit for bit, so both give the same sums, not sums within rounding).
//
// Stream: draw c of a stream keyed `key` is mix(key + (c + 1) * kGamma) (mod 2^64), SplitMix64's
// output sequence read at any position. Bootstrap: c = resample * n + item slot; the index is
// floor(z * n / 2^64) (n < 2^32: exact in 64-bit pieces; each index gets floor or ceil of
// 2^64 / n of the values, a bias <= n / 2^64). Randomization: c = trial * words + word, one draw
// gives 64 items' swap bits (bit j of word w: item 64 w + j).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/greedy_match.hpp"  // the run-time ISA dispatch (CPUID) and its target names

namespace rapidscore::resample {

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
// Bootstrap sums accumulate in this many interleaved lanes (item i in lane i % kLanes, the lanes
// added ((0 + 1) + 2) + 3 at the end): four independent addition chains instead of one.
constexpr std::size_t kLanes = 4;  // bootstrap_sums_body names its four lanes
constexpr std::size_t kBatch = 256;       // indices drawn (and prefetched) before they are summed
constexpr std::size_t kTrialBlock = 1024;  // trials whose sums stay in cache while the tables do

RAPIDSCORE_ALWAYS_INLINE std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// floor(z * n / 2^64) for n < 2^32, in 32-bit multiplies: vectorises where 64-bit lanes multiply
// (AVX-512).
RAPIDSCORE_ALWAYS_INLINE std::uint64_t bounded_split(std::uint64_t z, std::uint64_t n) {
    const std::uint64_t high = (z >> 32) * n, low = ((z & 0xffffffffull) * n) >> 32;
    return (high + low) >> 32;
}

// The same number in one 64 x 64 -> 128-bit multiply: faster where the draws stay scalar.
RAPIDSCORE_ALWAYS_INLINE std::uint64_t bounded(std::uint64_t z, std::uint64_t n) {
#ifdef __SIZEOF_INT128__
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(z) * n) >> 64);
#else
    return bounded_split(z, n);
#endif
}

// C consecutive doubles as one value: a GCC / clang vector (added lane by lane, as the scalar
// loop would: the same sums), else a plain array.
#if defined(__GNUC__) || defined(__clang__)
template <std::size_t C>
struct BlockOf {
    typedef double type __attribute__((vector_size(8 * C)));
};
template <std::size_t C>
using Block = typename BlockOf<C>::type;
#else
template <std::size_t C>
struct Block {
    double v[C];
    Block& operator+=(const Block& other) {
        for (std::size_t c = 0; c < C; ++c) v[c] += other.v[c];
        return *this;
    }
};
#endif

template <std::size_t C>
RAPIDSCORE_ALWAYS_INLINE void load(Block<C>& out, const double* p) {
    std::memcpy(&out, p, sizeof out);
}

template <std::size_t C>
RAPIDSCORE_ALWAYS_INLINE void add(Block<C>& sum, const double* p) {
    Block<C> value;
    std::memcpy(&value, p, sizeof value);
    sum += value;
}

template <std::size_t C>
RAPIDSCORE_ALWAYS_INLINE void store(double* p, const Block<C>& value) {
    std::memcpy(p, &value, sizeof value);
}

// The items drawn by slots 0 .. m - 1 after `state` (state + (b + 1) * kGamma is slot b's).
template <bool kVector>
RAPIDSCORE_ALWAYS_INLINE void draw_items(std::uint64_t state, std::uint64_t n, std::uint32_t* items, std::size_t m) {
    for (std::size_t b = 0; b < m; ++b) {
        const std::uint64_t z = mix(state + (b + 1) * kGamma);
        items[b] = static_cast<std::uint32_t>(kVector ? bounded_split(z, n) : bounded(z, n));
    }
}

RAPIDSCORE_ALWAYS_INLINE void prefetch(const double* p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

// out[r, :] = the column sums of `rows` (n x stride, row-major) over resample first + r's items,
// r < count. C columns are summed at a time (stride % C == 0): the lanes' C accumulators stay
// in registers through a batch of gathers.
template <std::size_t C, bool kVector>
RAPIDSCORE_ALWAYS_INLINE void bootstrap_sums_body(const double* rows, std::size_t n, std::size_t stride,
                                                  std::uint64_t key, std::uint64_t first, std::size_t count,
                                                  double* out) {
    std::uint32_t items[kBatch];
    std::size_t offset[kBatch];
    std::vector<double> acc(kLanes * stride);
    for (std::size_t r = 0; r < count; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0);
        std::uint64_t state = key + (first + r) * static_cast<std::uint64_t>(n) * kGamma;
        for (std::size_t start = 0; start < n; start += kBatch) {
            const std::size_t m = std::min(kBatch, n - start);
            draw_items<kVector>(state, n, items, m);
            state += m * kGamma;
            for (std::size_t b = 0; b < m; ++b) {
                offset[b] = static_cast<std::size_t>(items[b]) * stride;
                prefetch(rows + offset[b]);
            }
            for (std::size_t c0 = 0; c0 < stride; c0 += C) {
                // one C-double block per lane (a vector register where C doubles fit one)
                Block<C> a0, a1, a2, a3;
                load<C>(a0, &acc[0 * stride + c0]);
                load<C>(a1, &acc[1 * stride + c0]);
                load<C>(a2, &acc[2 * stride + c0]);
                load<C>(a3, &acc[3 * stride + c0]);
                std::size_t b = 0;  // kBatch % kLanes == 0: item start + b is in lane b % kLanes
                for (; b + kLanes <= m; b += kLanes) {
                    add<C>(a0, rows + offset[b] + c0);
                    add<C>(a1, rows + offset[b + 1] + c0);
                    add<C>(a2, rows + offset[b + 2] + c0);
                    add<C>(a3, rows + offset[b + 3] + c0);
                }
                if (b < m) add<C>(a0, rows + offset[b] + c0);
                if (b + 1 < m) add<C>(a1, rows + offset[b + 1] + c0);
                if (b + 2 < m) add<C>(a2, rows + offset[b + 2] + c0);
                store<C>(&acc[0 * stride + c0], a0);
                store<C>(&acc[1 * stride + c0], a1);
                store<C>(&acc[2 * stride + c0], a2);
                store<C>(&acc[3 * stride + c0], a3);
            }
        }
        for (std::size_t c = 0; c < stride; ++c) {
            double total = acc[c];
            for (std::size_t l = 1; l < kLanes; ++l) total += acc[l * stride + c];
            out[r * stride + c] = total;
        }
    }
}

// out[t, :] = the sums of `gaps` (n x stride, row-major) over the items trial first + t swaps.
// For each word (64 items) and each of its 8 bytes, a table holds the sums of every subset of
// the byte's 8 items (table[v + 2^k] = table[v] + row k, k = 0..7; rows past n are zeros); a
// trial's sum adds its 8 bytes' table entries word by word, in item order.
template <std::size_t C>
RAPIDSCORE_ALWAYS_INLINE void randomization_sums_body(const double* gaps, std::size_t n, std::size_t stride,
                                                      std::uint64_t key, std::uint64_t first, std::size_t count,
                                                      double* out) {
    const std::size_t words = (n + 63) / 64;
    std::fill(out, out + count * stride, 0.0);
    std::vector<double> tables(8 * 256 * stride);
    const std::vector<double> zero_row(stride, 0.0);
    for (std::size_t block = 0; block < count; block += kTrialBlock) {
        const std::size_t end = std::min(count, block + kTrialBlock);
        for (std::size_t w = 0; w < words; ++w) {
            for (std::size_t g = 0; g < 8; ++g) {
                double* table = tables.data() + g * 256 * stride;
                std::fill(table, table + stride, 0.0);
                for (std::size_t k = 0; k < 8; ++k) {
                    const std::size_t item = w * 64 + g * 8 + k;
                    const double* row = item < n ? gaps + item * stride : zero_row.data();
                    const std::size_t half = std::size_t{1} << k;
                    for (std::size_t v = 0; v < half; ++v)
                        for (std::size_t c = 0; c < stride; ++c)
                            table[(half + v) * stride + c] = table[v * stride + c] + row[c];
                }
            }
            for (std::size_t t = block; t < end; ++t) {
                const std::uint64_t z = mix(key + ((first + t) * static_cast<std::uint64_t>(words) + w + 1) * kGamma);
                double* sums = out + t * stride;
                for (std::size_t c0 = 0; c0 < stride; c0 += C) {
                    Block<C> a;
                    load<C>(a, sums + c0);
                    for (std::size_t g = 0; g < 8; ++g)
                        add<C>(a, tables.data() + (g * 256 + ((z >> (8 * g)) & 0xff)) * stride + c0);
                    store<C>(sums + c0, a);
                }
            }
        }
    }
}

// One copy of each kernel per instruction set, chosen by the matching kernel's CPUID dispatch
// (build_info.matching_isa): the same additions in the same order, so the same sums in every copy.
using Kernel = void (*)(const double*, std::size_t, std::size_t, std::uint64_t, std::uint64_t, std::size_t,
                        double*);

#define RAPIDSCORE_RESAMPLE_COPIES(SUFFIX, ATTRIBUTE, VECTOR)                                                 \
    template <std::size_t C>                                                                                 \
    ATTRIBUTE void bootstrap_sums_##SUFFIX(const double* rows, std::size_t n, std::size_t stride,          \
                                           std::uint64_t key, std::uint64_t first, std::size_t count,      \
                                           double* out) {                                                  \
        bootstrap_sums_body<C, VECTOR>(rows, n, stride, key, first, count, out);                           \
    }                                                                                                        \
    template <std::size_t C>                                                                                 \
    ATTRIBUTE void randomization_sums_##SUFFIX(const double* gaps, std::size_t n, std::size_t stride,      \
                                               std::uint64_t key, std::uint64_t first, std::size_t count,  \
                                               double* out) {                                              \
        randomization_sums_body<C>(gaps, n, stride, key, first, count, out);                               \
    }

RAPIDSCORE_RESAMPLE_COPIES(baseline, , false)
#if RAPIDSCORE_ISA_DISPATCH
// AVX-512 multiplies 64-bit lanes (vpmullq): the draws vectorise; AVX2 would emulate them slower
// than the scalar 128-bit multiply, so x86-64-v3 keeps the baseline copy.
RAPIDSCORE_RESAMPLE_COPIES(v4, __attribute__((target(RAPIDSCORE_TARGET_V4))), true)
#endif

template <std::size_t C>
Kernel bootstrap_kernel() {
#if RAPIDSCORE_ISA_DISPATCH
    if (std::string_view(matching_isa_name()) == "x86-64-v4") return bootstrap_sums_v4<C>;
#endif
    return bootstrap_sums_baseline<C>;
}

template <std::size_t C>
Kernel randomization_kernel() {
#if RAPIDSCORE_ISA_DISPATCH
    if (std::string_view(matching_isa_name()) == "x86-64-v4") return randomization_sums_v4<C>;
#endif
    return randomization_sums_baseline<C>;
}

// Column sums of `rows` (n x stride) over bootstrap resamples first .. first + count - 1 (stride
// 1, 2, 4 or a multiple of 8), into out (count x stride).
inline void bootstrap_sums(const double* rows, std::size_t n, std::size_t stride, std::uint64_t key,
                           std::uint64_t first, std::size_t count, double* out) {
    const Kernel kernel = stride == 1 ? bootstrap_kernel<1>() : stride == 2 ? bootstrap_kernel<2>()
                          : stride == 4 ? bootstrap_kernel<4>() : bootstrap_kernel<8>();
    kernel(rows, n, stride, key, first, count, out);
}

// Column sums of `gaps` (n x stride) over the items randomization trials first .. first + count - 1
// swap, into out (count x stride).
inline void randomization_sums(const double* gaps, std::size_t n, std::size_t stride, std::uint64_t key,
                               std::uint64_t first, std::size_t count, double* out) {
    const Kernel kernel = stride == 1 ? randomization_kernel<1>() : stride == 2 ? randomization_kernel<2>()
                          : stride == 4 ? randomization_kernel<4>() : randomization_kernel<8>();
    kernel(gaps, n, stride, key, first, count, out);
}

// The copy the kernels run on this CPU ("x86-64-v4" or "baseline").
inline const char* resample_isa_name() {
#if RAPIDSCORE_ISA_DISPATCH
    if (std::string_view(matching_isa_name()) == "x86-64-v4") return "x86-64-v4";
#endif
    return "baseline";
}

}  // namespace rapidscore::resample

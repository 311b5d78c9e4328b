// BERTScore greedy cosine max-matching over a flat store of token embeddings.
//
// Every sentence s owns rows offsets[s] .. offsets[s+1] of one row-major float32 matrix
// E (T x D) of (L2-normalised) token embeddings, and one weight per token. For a pair
// (candidate c, reference r):
//   sim[i, j] = <E_c[i], E_r[j]>            over all real tokens of both sentences
//   p_i = max_j sim[i, j],  r_j = max_i sim[i, j]
//   P = sum_i w_i p_i / sum_i w_i,  R = sum_j w_j r_j / sum_j w_j,  F = 2PR / (P + R)
// with P = R = F = 0 when either side has no tokens or a zero weight sum, and F = 0 when
// P + R == 0. Sums are accumulated in double; dot products in float32 (as the reference's
// torch.bmm does).
//
// The similarity matrix is never stored: a reference is packed, transposed into column panels
// (D x 16 or D x 8 floats), and a register-blocked micro-kernel computes a 6 x 16 tile of sim
// at a time, folding it into running row maxima (complete once all panels of the reference
// are done) and column maxima (a scratch of the reference length).
// Callers validate inputs (sizes, offsets, indices); this header trusts them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/parallel.hpp"

// Run-time ISA dispatch for the matching loop: x86-64-v4 (AVX-512), x86-64-v3 (AVX2+FMA) and
// baseline copies of one body, chosen once per process by CPUID. Neither target_clones nor
// __builtin_cpu_supports: their feature bits come from the runtime library (libgcc, compiler-rt),
// and zig's leaves them unset, so a wheel built by zig's clang always ran the baseline copy.
// Linux x86-64 with GCC >= 11 or clang >= 14 (the compilers that know arch=x86-64-v4).
#if defined(__x86_64__) && defined(__linux__) && !defined(RAPIDSCORE_NO_TARGET_CLONES) && \
    ((defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11) ||                      \
     (defined(__clang__) && __clang_major__ >= 14))
#define RAPIDSCORE_ISA_DISPATCH 1
#include <cpuid.h>
#else
#define RAPIDSCORE_ISA_DISPATCH 0
#endif

#if defined(__GNUC__)
#define RAPIDSCORE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define RAPIDSCORE_ALWAYS_INLINE inline
#endif

// GCC contracts a * b + c into an FMA wherever the target has one (-ffp-contract=fast, its default
// in GNU mode); clang's default contracts within one expression only, and under zig's driver the
// copies below were not fused at all. Under this pragma clang fuses as GCC does: a wheel built by
// clang or zig gives the numbers of a GCC build on the same CPU.
#if defined(__clang__)
#define RAPIDSCORE_FP_CONTRACT_FAST _Pragma("clang fp contract(fast)")
#else
#define RAPIDSCORE_FP_CONTRACT_FAST
#endif

namespace rapidscore {
namespace greedy_detail {

constexpr int kMR = 6;         // candidate rows per tile
constexpr int kNRWide = 16;    // reference columns per full panel
constexpr int kNRNarrow = 8;   // reference columns of a short trailing panel

// Packed layout of one reference sentence: consecutive panels; a panel of width w holds
// D x w floats, element (k, j) at k * w + j, columns beyond the sentence zero-filled.
struct PackedRef {
    std::size_t offset = 0;  // first float of this sentence in the packed buffer
    int64_t length = 0;      // real tokens
};

// Panel widths for a reference of n tokens: 16-wide panels, and a trailing 8-wide one when
// at most 8 columns remain (so at most 7 padded columns are computed per reference).
inline int64_t packed_columns(int64_t n) {
    int64_t full = n / kNRWide, rest = n % kNRWide;
    if (rest == 0) return full * kNRWide;
    return full * kNRWide + (rest <= kNRNarrow ? kNRNarrow : kNRWide);
}

inline void pack_reference(const float* rows, int64_t n, int64_t dim, float* out) {
    int64_t j0 = 0;
    while (j0 < n) {
        const int64_t rest = n - j0;
        const int width = rest > kNRNarrow ? kNRWide : kNRNarrow;
        const int64_t valid = std::min<int64_t>(width, rest);
        for (int64_t k = 0; k < dim; ++k) {
            float* dst = out + k * width;
            for (int64_t j = 0; j < valid; ++j) dst[j] = rows[(j0 + j) * dim + k];
            for (int64_t j = valid; j < width; ++j) dst[j] = 0.0f;
        }
        out += dim * width;
        j0 += width;
    }
}

// acc[r][j] = sum_k a[r][k] * panel[k * NR + j] for MR candidate rows and one panel.
#if defined(__GNUC__)
// 8-float vectors (GCC/clang vector extension): accumulators stay in registers, which plain
// float arrays do not reliably achieve; each ISA clone lowers them to its own instructions.
typedef float vec8 __attribute__((vector_size(32)));

// By reference, not by value: returning a vector type is ABI-dependent (-Wpsabi).
RAPIDSCORE_ALWAYS_INLINE void load8(vec8& v, const float* p) { __builtin_memcpy(&v, p, sizeof(v)); }

template <int MR, int NR>
RAPIDSCORE_ALWAYS_INLINE void micro_tile(const float* const* a, const float* panel, int64_t dim,
                                         float (&acc)[kMR][kNRWide]) {
    RAPIDSCORE_FP_CONTRACT_FAST
    constexpr int NV = NR / 8;
    vec8 sum[MR][NV];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) sum[r][v] = vec8{};
    for (int64_t k = 0; k < dim; ++k) {
        const float* b = panel + k * NR;
        vec8 bv[NV];
        for (int v = 0; v < NV; ++v) load8(bv[v], b + 8 * v);
        for (int r = 0; r < MR; ++r) {
            vec8 av = vec8{} + a[r][k];  // broadcast
            for (int v = 0; v < NV; ++v) sum[r][v] += av * bv[v];
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) __builtin_memcpy(&acc[r][8 * v], &sum[r][v], sizeof(vec8));
}
#else
template <int MR, int NR>
inline void micro_tile(const float* const* a, const float* panel, int64_t dim,
                       float (&acc)[kMR][kNRWide]) {
    float sum[MR][NR] = {};
    for (int64_t k = 0; k < dim; ++k) {
        const float* b = panel + k * NR;
        for (int r = 0; r < MR; ++r) {
            const float av = a[r][k];
            for (int j = 0; j < NR; ++j) sum[r][j] += av * b[j];
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j) acc[r][j] = sum[r][j];
}
#endif

template <int MR, int NR>
RAPIDSCORE_ALWAYS_INLINE void tile_and_fold(const float* const* a, const float* panel, int64_t dim,
                                            int64_t valid_cols, float* row_max, float* col_max) {
    float acc[kMR][kNRWide];
    micro_tile<MR, NR>(a, panel, dim, acc);
    for (int r = 0; r < MR; ++r) {
        float m = row_max[r];
        for (int64_t j = 0; j < valid_cols; ++j) m = acc[r][j] > m ? acc[r][j] : m;
        row_max[r] = m;
    }
    for (int64_t j = 0; j < valid_cols; ++j) {
        float m = col_max[j];
        for (int r = 0; r < MR; ++r) m = acc[r][j] > m ? acc[r][j] : m;
        col_max[j] = m;
    }
}

template <int MR>
RAPIDSCORE_ALWAYS_INLINE void rows_against_reference(const float* const* a, const float* packed,
                                                     int64_t n_ref, int64_t dim, float row_start,
                                                     float* row_max, float* col_max) {
    for (int r = 0; r < MR; ++r) row_max[r] = row_start;
    int64_t j0 = 0;
    while (j0 < n_ref) {
        const int64_t rest = n_ref - j0;
        if (rest > kNRNarrow) {
            tile_and_fold<MR, kNRWide>(a, packed, dim, std::min<int64_t>(kNRWide, rest), row_max,
                                       col_max + j0);
            packed += dim * kNRWide;
            j0 += kNRWide;
        } else {
            tile_and_fold<MR, kNRNarrow>(a, packed, dim, rest, row_max, col_max + j0);
            packed += dim * kNRNarrow;
            j0 += kNRNarrow;
        }
    }
}

// Weighted precision and recall sums of one pair. col_max must hold n_ref floats.
// Returns sum_i w_i p_i in *p_sum and sum_j w_j r_j in *r_sum. floor_p / floor_r start the
// row / column maxima at 0 instead of -inf (emulates bert-score's zero-similarity padding).
RAPIDSCORE_ALWAYS_INLINE void match_pair_sums_body(const float* cand, int64_t n_cand, const float* cand_w,
                                                 const float* packed_ref, int64_t n_ref, const float* ref_w,
                                                 int64_t dim, bool floor_p, bool floor_r, float* col_max,
                                                 double* p_sum, double* r_sum) {
    RAPIDSCORE_FP_CONTRACT_FAST
    const float row_start = floor_p ? 0.0f : -std::numeric_limits<float>::infinity();
    const float col_start = floor_r ? 0.0f : -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n_ref; ++j) col_max[j] = col_start;
    double ps = 0.0;
    float row_max[kMR];
    const float* a[kMR];
    int64_t i0 = 0;
    for (; i0 + kMR <= n_cand; i0 += kMR) {
        for (int r = 0; r < kMR; ++r) a[r] = cand + (i0 + r) * dim;
        rows_against_reference<kMR>(a, packed_ref, n_ref, dim, row_start, row_max, col_max);
        for (int r = 0; r < kMR; ++r) ps += static_cast<double>(cand_w[i0 + r]) * row_max[r];
    }
    const int64_t rest = n_cand - i0;
    if (rest > 0) {
        for (int r = 0; r < rest; ++r) a[r] = cand + (i0 + r) * dim;
        switch (rest) {
            case 1: rows_against_reference<1>(a, packed_ref, n_ref, dim, row_start, row_max, col_max); break;
            case 2: rows_against_reference<2>(a, packed_ref, n_ref, dim, row_start, row_max, col_max); break;
            case 3: rows_against_reference<3>(a, packed_ref, n_ref, dim, row_start, row_max, col_max); break;
            case 4: rows_against_reference<4>(a, packed_ref, n_ref, dim, row_start, row_max, col_max); break;
            default: rows_against_reference<5>(a, packed_ref, n_ref, dim, row_start, row_max, col_max); break;
        }
        for (int r = 0; r < rest; ++r) ps += static_cast<double>(cand_w[i0 + r]) * row_max[r];
    }
    double rs = 0.0;
    for (int64_t j = 0; j < n_ref; ++j) rs += static_cast<double>(ref_w[j]) * col_max[j];
    *p_sum = ps;
    *r_sum = rs;
}

using MatchPairSums = void (*)(const float*, int64_t, const float*, const float*, int64_t, const float*,
                               int64_t, bool, bool, float*, double*, double*);

#define RAPIDSCORE_MATCH_PAIR_SUMS_COPY(NAME, ATTRIBUTES)                                                  \
    ATTRIBUTES static void NAME(const float* cand, int64_t n_cand, const float* cand_w,                   \
                                const float* packed_ref, int64_t n_ref, const float* ref_w, int64_t dim, \
                                bool floor_p, bool floor_r, float* col_max, double* p_sum,               \
                                double* r_sum) {                                                         \
        match_pair_sums_body(cand, n_cand, cand_w, packed_ref, n_ref, ref_w, dim, floor_p, floor_r,      \
                             col_max, p_sum, r_sum);                                                     \
    }

RAPIDSCORE_MATCH_PAIR_SUMS_COPY(match_pair_sums_baseline, )
#if RAPIDSCORE_ISA_DISPATCH
#if defined(__clang__)
// The levels' features by name: zig's clang ignores target("arch=x86-64-vN") (its copies stayed SSE2).
#define RAPIDSCORE_TARGET_V3 "avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,popcnt,sse4.1,sse4.2,ssse3,xsave"
#define RAPIDSCORE_TARGET_V4 RAPIDSCORE_TARGET_V3 ",avx512f,avx512bw,avx512cd,avx512dq,avx512vl"
#else
#define RAPIDSCORE_TARGET_V3 "arch=x86-64-v3"
#define RAPIDSCORE_TARGET_V4 "arch=x86-64-v4"
#endif
RAPIDSCORE_MATCH_PAIR_SUMS_COPY(match_pair_sums_v3, __attribute__((target(RAPIDSCORE_TARGET_V3))))
RAPIDSCORE_MATCH_PAIR_SUMS_COPY(match_pair_sums_v4, __attribute__((target(RAPIDSCORE_TARGET_V4))))
#endif

struct MatchingIsa {
    MatchPairSums function;
    const char* name;
};

#if RAPIDSCORE_ISA_DISPATCH
// Whether the OS saves the given XCR0 register states (SSE/AVX 0x6; with AVX-512 0xE6).
inline bool os_saves_state(uint64_t mask) {
    uint32_t lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((static_cast<uint64_t>(hi) << 32 | lo) & mask) == mask;
}
#endif

// The copy for this CPU: every feature of the level's instruction set (the compiler may use any).
inline MatchingIsa select_matching_isa() {
#if RAPIDSCORE_ISA_DISPATCH
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return {match_pair_sums_baseline, "baseline"};
    const bool level2 = (c & (1u << 20)) && (c & (1u << 23)) && (c & (1u << 9)) && (c & (1u << 19));
    const bool avx_fma = (c & (1u << 28)) && (c & (1u << 12)) && (c & (1u << 22)) && (c & (1u << 29)) &&
                         os_saves_state(0x6);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    const bool lzcnt = __get_cpuid(0x80000001u, &a1, &b1, &c1, &d1) && (c1 & (1u << 5));
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return {match_pair_sums_baseline, "baseline"};
    const bool v3 = level2 && avx_fma && lzcnt && (b & (1u << 5)) && (b & (1u << 3)) && (b & (1u << 8));
    const bool v4 = v3 && os_saves_state(0xE6) && (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 28)) &&
                    (b & (1u << 30)) && (b & (1u << 31));
    if (v4) return {match_pair_sums_v4, "x86-64-v4"};
    if (v3) return {match_pair_sums_v3, "x86-64-v3"};
#endif
    return {match_pair_sums_baseline, "baseline"};
}

inline const MatchingIsa& matching_isa() {
    static const MatchingIsa chosen = select_matching_isa();
    return chosen;
}

inline void match_pair_sums(const float* cand, int64_t n_cand, const float* cand_w, const float* packed_ref,
                            int64_t n_ref, const float* ref_w, int64_t dim, bool floor_p, bool floor_r,
                            float* col_max, double* p_sum, double* r_sum) {
    matching_isa().function(cand, n_cand, cand_w, packed_ref, n_ref, ref_w, dim, floor_p, floor_r, col_max,
                            p_sum, r_sum);
}

}  // namespace greedy_detail

// The instruction set the matching kernel runs on this CPU: "x86-64-v4", "x86-64-v3" or "baseline".
inline const char* matching_isa_name() { return greedy_detail::matching_isa().name; }

// Per-sentence weight sums and the scoring of one pair against a packed reference.
class GreedyMatcher {
public:
    // embeddings: T x dim row-major; offsets: n_sentences + 1 monotone values in [0, T]; weights: T.
    GreedyMatcher(const float* embeddings, int64_t dim, const int64_t* offsets, int64_t n_sentences,
                  const float* weights)
        : emb_(embeddings), dim_(dim), offsets_(offsets), weights_(weights),
          weight_sums_(static_cast<std::size_t>(n_sentences), 0.0) {
        for (int64_t s = 0; s < n_sentences; ++s) {
            double total = 0.0;
            for (int64_t t = offsets[s]; t < offsets[s + 1]; ++t) total += weights[t];
            weight_sums_[s] = total;
        }
    }

    int64_t length(int64_t s) const { return offsets_[s + 1] - offsets_[s]; }
    int64_t dim() const { return dim_; }

    // Floats needed to pack a reference of n tokens.
    std::size_t packed_size(int64_t n) const {
        return static_cast<std::size_t>(greedy_detail::packed_columns(n) * dim_);
    }

    void pack(int64_t r, float* out) const {
        greedy_detail::pack_reference(emb_ + offsets_[r] * dim_, length(r), dim_, out);
    }

    // Scores candidate c against reference r packed at packed_r; col_max holds length(r) floats.
    // floor_p / floor_r: see match_pair_sums (bert-score padding emulation; false = exact maxima).
    void score(int64_t c, int64_t r, const float* packed_r, float* col_max, double* P, double* R,
               double* F, bool floor_p = false, bool floor_r = false) const {
        const int64_t n_cand = length(c), n_ref = length(r);
        const double wc = weight_sums_[c], wr = weight_sums_[r];
        if (n_cand == 0 || n_ref == 0 || wc == 0.0 || wr == 0.0) {
            *P = *R = *F = 0.0;
            return;
        }
        double ps = 0.0, rs = 0.0;
        greedy_detail::match_pair_sums(emb_ + offsets_[c] * dim_, n_cand, weights_ + offsets_[c], packed_r,
                                       n_ref, weights_ + offsets_[r], dim_, floor_p, floor_r, col_max,
                                       &ps, &rs);
        const double p = ps / wc, rr = rs / wr;
        const double denom = p + rr;
        *P = p;
        *R = rr;
        *F = denom == 0.0 ? 0.0 : 2.0 * p * rr / denom;
    }

private:
    const float* emb_;
    int64_t dim_;
    const int64_t* offsets_;
    const float* weights_;
    std::vector<double> weight_sums_;
};

// Scores m (candidate, reference) pairs given as pairs[2k], pairs[2k + 1]; writes P, R, F (m).
// floors (nullable, 2m bytes): floors[2k] / floors[2k + 1] non-zero start pair k's token
// precision / recall maxima at 0 (bert-score's padded positions), see match_pair_sums.
// Pairs are visited grouped by reference so that a reference shared by consecutive pairs is
// packed once per task; each task packs into its own scratch (O(max length x dim)), so no
// second copy of the embeddings is made. Results do not depend on the visiting order.
inline void greedy_match_pairs(const float* embeddings, int64_t dim, const int64_t* offsets,
                               int64_t n_sentences, const float* weights, const int64_t* pairs,
                               int64_t m, double* P, double* R, double* F, int n_threads,
                               const uint8_t* floors = nullptr) {
    GreedyMatcher matcher(embeddings, dim, offsets, n_sentences, weights);
    std::vector<int64_t> order(static_cast<std::size_t>(m));
    int64_t max_ref_len = 0;
    for (int64_t k = 0; k < m; ++k) {
        order[k] = k;
        max_ref_len = std::max(max_ref_len, matcher.length(pairs[2 * k + 1]));
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return pairs[2 * a + 1] < pairs[2 * b + 1]; });
    const std::size_t pack_floats = std::max<std::size_t>(1, matcher.packed_size(max_ref_len));
    const std::size_t col_floats = static_cast<std::size_t>(std::max<int64_t>(1, max_ref_len));
    constexpr int64_t kBlock = 32;
    const std::size_t n_blocks = static_cast<std::size_t>((m + kBlock - 1) / kBlock);
    parallel_for(n_blocks, n_threads, [&](std::size_t b) {
        std::vector<float> packed(pack_floats), col_max(col_floats);
        int64_t packed_ref = -1;
        const int64_t end = std::min<int64_t>(m, static_cast<int64_t>(b + 1) * kBlock);
        for (int64_t o = static_cast<int64_t>(b) * kBlock; o < end; ++o) {
            const int64_t k = order[o], c = pairs[2 * k], r = pairs[2 * k + 1];
            if (r != packed_ref) {
                matcher.pack(r, packed.data());
                packed_ref = r;
            }
            const bool floor_p = floors != nullptr && floors[2 * k] != 0;
            const bool floor_r = floors != nullptr && floors[2 * k + 1] != 0;
            matcher.score(c, r, packed.data(), col_max.data(), P + k, R + k, F + k, floor_p, floor_r);
        }
    });
}

// Scores every candidate against every reference: P, R, F are row-major (nc x nr).
// Every distinct reference is packed once (a copy of the references' embeddings, padded to
// whole panels) and reused by all candidates; one task per candidate keeps its rows in cache.
inline void greedy_match_pairwise(const float* embeddings, int64_t dim, const int64_t* offsets,
                                  int64_t n_sentences, const float* weights,
                                  const int64_t* candidates, int64_t nc, const int64_t* references,
                                  int64_t nr, double* P, double* R, double* F, int n_threads) {
    GreedyMatcher matcher(embeddings, dim, offsets, n_sentences, weights);
    std::vector<std::size_t> where(static_cast<std::size_t>(n_sentences), SIZE_MAX);
    std::vector<int64_t> distinct;
    std::size_t total = 0;
    int64_t max_ref_len = 0;
    for (int64_t j = 0; j < nr; ++j) {
        const int64_t r = references[j];
        if (where[r] != SIZE_MAX) continue;
        where[r] = total;
        distinct.push_back(r);
        total += matcher.packed_size(matcher.length(r));
        max_ref_len = std::max(max_ref_len, matcher.length(r));
    }
    std::vector<float> buffer(total);
    parallel_for(
        distinct.size(), n_threads,
        [&](std::size_t k) { matcher.pack(distinct[k], buffer.data() + where[distinct[k]]); }, 64);
    const std::size_t col_floats = static_cast<std::size_t>(std::max<int64_t>(1, max_ref_len));
    parallel_for(static_cast<std::size_t>(nc), n_threads, [&](std::size_t ci) {
        std::vector<float> col_max(col_floats);
        const std::size_t row = ci * static_cast<std::size_t>(nr);
        for (int64_t j = 0; j < nr; ++j) {
            const int64_t r = references[j];
            matcher.score(candidates[ci], r, buffer.data() + where[r], col_max.data(), P + row + j,
                          R + row + j, F + row + j);
        }
    });
}

}  // namespace rapidscore

// libFuzzer harness: BERTScore greedy matching (csrc/core/greedy_match.hpp) against a plain
// O(n m d) reference written out below. Embedding values are multiples of 1/8 and weights of
// 1/4 in small dimensions, so every dot product and sum is exact in float32 / float64: the
// blocked, vectorised kernel must then agree with the reference bit for bit.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/greedy_match.hpp"
#include "fuzz_input.hpp"

namespace {

struct Pair3 {
    double p, r, f;
};

Pair3 reference_pair(const std::vector<float>& emb, int64_t dim, const std::vector<int64_t>& off,
                     const std::vector<float>& w, int64_t c, int64_t r, bool floor_p, bool floor_r) {
    const int64_t c0 = off[c], c1 = off[c + 1], r0 = off[r], r1 = off[r + 1];
    double wc = 0, wr = 0;
    for (int64_t i = c0; i < c1; ++i) wc += w[i];
    for (int64_t j = r0; j < r1; ++j) wr += w[j];
    if (c1 == c0 || r1 == r0 || wc == 0.0 || wr == 0.0) return {0, 0, 0};
    const float neg = -std::numeric_limits<float>::infinity();
    std::vector<float> col(static_cast<std::size_t>(r1 - r0), floor_r ? 0.0f : neg);
    double ps = 0;
    for (int64_t i = c0; i < c1; ++i) {
        float row = floor_p ? 0.0f : neg;
        for (int64_t j = r0; j < r1; ++j) {
            float dot = 0;
            for (int64_t k = 0; k < dim; ++k) dot += emb[i * dim + k] * emb[j * dim + k];
            row = std::max(row, dot);
            col[j - r0] = std::max(col[j - r0], dot);
        }
        ps += static_cast<double>(w[i]) * row;
    }
    double rs = 0;
    for (int64_t j = r0; j < r1; ++j) rs += static_cast<double>(w[j]) * col[j - r0];
    const double p = ps / wc, rr = rs / wr;
    return {p, rr, p + rr == 0.0 ? 0.0 : 2 * p * rr / (p + rr)};
}

void expect_equal(double got, double want, const char* what) {
    if (!(got == want) && !(std::fabs(got - want) <= 1e-12 * std::max(1.0, std::fabs(want)))) fuzz::fail(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const int64_t dim = in.range(1, 40);
    const int64_t n_sentences = in.range(1, 9);
    std::vector<int64_t> off(1, 0);
    for (int64_t s = 0; s < n_sentences; ++s) off.push_back(off.back() + in.range(0, 20));
    const int64_t n_tokens = off.back();
    std::vector<float> emb(static_cast<std::size_t>(n_tokens * dim)), w(static_cast<std::size_t>(n_tokens));
    for (auto& x : emb) x = static_cast<float>(static_cast<int>(in.byte() % 17) - 8) / 8.0f;
    for (auto& x : w) x = static_cast<float>(in.byte() % 5) / 4.0f;
    const int64_t m = in.range(0, 24);
    std::vector<int64_t> pairs(static_cast<std::size_t>(2 * m));
    std::vector<uint8_t> floors(static_cast<std::size_t>(2 * m));
    for (auto& x : pairs) x = in.range(0, static_cast<int>(n_sentences - 1));
    for (auto& x : floors) x = in.flag();
    const bool use_floors = in.flag();
    const int threads = in.range(1, 3);

    std::vector<double> P(m), R(m), F(m);
    rapidscore::greedy_match_pairs(emb.data(), dim, off.data(), n_sentences, w.data(), pairs.data(), m, P.data(),
                                   R.data(), F.data(), threads, use_floors ? floors.data() : nullptr);
    for (int64_t k = 0; k < m; ++k) {
        const bool fp = use_floors && floors[2 * k], fr = use_floors && floors[2 * k + 1];
        const Pair3 want = reference_pair(emb, dim, off, w, pairs[2 * k], pairs[2 * k + 1], fp, fr);
        expect_equal(P[k], want.p, "greedy_match_pairs precision differs from the reference");
        expect_equal(R[k], want.r, "greedy_match_pairs recall differs from the reference");
        expect_equal(F[k], want.f, "greedy_match_pairs F1 differs from the reference");
    }

    // Every candidate against every reference (the pairwise entry point).
    const int64_t nc = in.range(0, 6), nr = in.range(0, 6);
    std::vector<int64_t> cands(nc), refs(nr);
    for (auto& x : cands) x = in.range(0, static_cast<int>(n_sentences - 1));
    for (auto& x : refs) x = in.range(0, static_cast<int>(n_sentences - 1));
    std::vector<double> PP(nc * nr), RR(nc * nr), FF(nc * nr);
    rapidscore::greedy_match_pairwise(emb.data(), dim, off.data(), n_sentences, w.data(), cands.data(), nc,
                                      refs.data(), nr, PP.data(), RR.data(), FF.data(), threads);
    for (int64_t i = 0; i < nc; ++i)
        for (int64_t j = 0; j < nr; ++j) {
            const Pair3 want = reference_pair(emb, dim, off, w, cands[i], refs[j], false, false);
            expect_equal(PP[i * nr + j], want.p, "greedy_match_pairwise precision differs from the reference");
            expect_equal(RR[i * nr + j], want.r, "greedy_match_pairwise recall differs from the reference");
            expect_equal(FF[i * nr + j], want.f, "greedy_match_pairwise F1 differs from the reference");
        }
    return 0;
}

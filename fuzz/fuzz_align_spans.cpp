// libFuzzer harness: span alignment (csrc/core/align_spans.hpp) against plain references: an
// exhaustive search over all one-to-one matchings for small records, and the dense O(n m) DJA
// table for larger flat records. The pair weight is written out again here from the documented
// rules (character Jaccard; SemEval: nervaluate's overlap rule, correct * A + B + J).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/align_spans.hpp"
#include "fuzz_input.hpp"

namespace {

using rapidscore::AlignMethod;
using rapidscore::AlignOptions;
using rapidscore::AlignScheme;

struct Side {
    std::vector<int64_t> start, end, label;
};

double jaccard(int64_t gs, int64_t ge, int64_t ps, int64_t pe) {
    const int64_t inter = std::min(ge, pe) - std::max(gs, ps);
    if (inter <= 0) return 0.0;
    return static_cast<double>(inter) / static_cast<double>((ge - gs) + (pe - ps) - inter);
}

double weight(const Side& g, std::size_t i, const Side& p, std::size_t j, const AlignOptions& opt, double k) {
    const double jac = jaccard(g.start[i], g.end[i], p.start[j], p.end[j]);
    if (opt.scheme == AlignScheme::Jaccard) return (jac > 0 && jac >= opt.min_jaccard) ? jac : 0.0;
    const bool same = g.start[i] == p.start[j] && g.end[i] == p.end[j];
    bool eligible = same && g.end[i] > g.start[i];
    if (!eligible && jac > 0) {
        const double overlap = static_cast<double>(std::min(g.end[i], p.end[j]) - std::max(g.start[i], p.start[j]));
        eligible = overlap / static_cast<double>(g.end[i] - g.start[i]) * 100.0 >= opt.min_overlap_percent;
    }
    if (!eligible) return 0.0;
    const bool same_label = g.label[i] == p.label[j];
    bool correct = false;
    switch (opt.scheme) {
        case AlignScheme::Strict: correct = same && same_label; break;
        case AlignScheme::Exact:
        case AlignScheme::Partial: correct = same; break;
        case AlignScheme::Type: correct = same_label; break;
        default: break;
    }
    const double big_b = k + 1.0, big_a = (k + 1.0) * (big_b + 1.0);
    return (correct ? big_a : 0.0) + big_b + jac;
}

// Best total weight over all matchings (exhaustive; records of at most 7 x 7 spans).
double exhaustive_best(std::size_t i, std::size_t n, std::size_t m, unsigned used,
                       const std::vector<double>& w) {
    if (i == n) return 0.0;
    double best = exhaustive_best(i + 1, n, m, used, w);
    for (std::size_t j = 0; j < m; ++j)
        if (!(used >> j & 1u) && w[i * m + j] > 0)
            best = std::max(best, w[i * m + j] + exhaustive_best(i + 1, n, m, used | (1u << j), w));
    return best;
}

// The dense DJA table: T(i, j) = max(T(i-1, j), T(i, j-1), T(i-1, j-1) + w(i, j)) (flat spans),
// with the documented back-pointer rule (skip gold on ties, skip prediction if strictly better,
// match if strictly better). Returns the matched pairs in increasing order.
std::vector<std::pair<int64_t, int64_t>> dense_dp_pairs(std::size_t n, std::size_t m, const std::vector<double>& w) {
    const std::size_t cols = m + 1;
    std::vector<double> t((n + 1) * cols, 0.0);
    std::vector<int> back((n + 1) * cols, 0);
    for (std::size_t i = 1; i <= n; ++i)
        for (std::size_t j = 1; j <= m; ++j) {
            double best = t[(i - 1) * cols + j];
            int from = 1;
            if (t[i * cols + j - 1] > best) { best = t[i * cols + j - 1]; from = 2; }
            const double x = w[(i - 1) * m + j - 1];
            if (x > 0 && t[(i - 1) * cols + j - 1] + x > best) { best = t[(i - 1) * cols + j - 1] + x; from = 3; }
            t[i * cols + j] = best;
            back[i * cols + j] = from;
        }
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (std::size_t i = n, j = m; i > 0 && j > 0;) {
        const int from = back[i * cols + j];
        if (from == 3) pairs.emplace_back(--i, --j);
        else if (from == 1) --i;
        else --j;
    }
    std::reverse(pairs.begin(), pairs.end());
    return pairs;
}

bool is_flat(const Side& s) {
    for (std::size_t k = 1; k < s.start.size(); ++k)
        if (s.start[k] < s.end[k - 1] || s.start[k] < s.start[k - 1]) return false;
    return true;
}

Side make_side(fuzz::Input& in, std::size_t n, bool flat) {
    Side s;
    int64_t at = 0;
    for (std::size_t k = 0; k < n; ++k) {
        int64_t start, len = in.range(0, 7);
        if (flat) {
            at += in.range(0, 3);
            start = at;
            at += len;
        } else {
            start = in.range(0, 30);
        }
        s.start.push_back(start);
        s.end.push_back(start + len);
        s.label.push_back(in.range(0, 2));
    }
    if (!flat) {  // sorted by start like real inputs, but possibly overlapping or nested
        std::vector<std::size_t> order(n);
        for (std::size_t k = 0; k < n; ++k) order[k] = k;
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.start[a] < s.start[b]; });
        Side sorted;
        for (std::size_t k : order) {
            sorted.start.push_back(s.start[k]);
            sorted.end.push_back(s.end[k]);
            sorted.label.push_back(s.label[k]);
        }
        if (in.flag()) return sorted;  // otherwise keep the unsorted order
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    AlignOptions opt;
    opt.scheme = static_cast<AlignScheme>(in.range(0, 4));
    const int method = in.range(0, 2);
    opt.method = static_cast<AlignMethod>(method);
    opt.min_jaccard = in.range(0, 4) / 4.0;
    opt.min_overlap_percent = in.flag() ? 1.0 : 50.0;
    const int threads = in.range(1, 3);
    const std::size_t n_records = static_cast<std::size_t>(in.range(1, 4));
    std::vector<Side> gold, pred;
    std::vector<int64_t> g_off(1, 0), p_off(1, 0);
    Side g_all, p_all;
    for (std::size_t r = 0; r < n_records; ++r) {
        const bool large = in.range(0, 7) == 0;  // flat records too large for the exhaustive search
        const bool flat = large || in.flag();
        const std::size_t n = static_cast<std::size_t>(large ? in.range(0, 60) : in.range(0, 7));
        const std::size_t m = static_cast<std::size_t>(large ? in.range(0, 60) : in.range(0, 7));
        gold.push_back(make_side(in, n, flat));
        pred.push_back(make_side(in, m, flat));
        for (const auto& pair : {std::make_pair(&gold.back(), &g_all), std::make_pair(&pred.back(), &p_all)}) {
            pair.second->start.insert(pair.second->start.end(), pair.first->start.begin(), pair.first->start.end());
            pair.second->end.insert(pair.second->end.end(), pair.first->end.begin(), pair.first->end.end());
            pair.second->label.insert(pair.second->label.end(), pair.first->label.begin(), pair.first->label.end());
        }
        g_off.push_back(static_cast<int64_t>(g_all.start.size()));
        p_off.push_back(static_cast<int64_t>(p_all.start.size()));
    }
    rapidscore::BatchAlignment out;
    try {
        out = rapidscore::align_batch(n_records, g_off.data(), g_all.start.data(), g_all.end.data(),
                                      g_all.label.data(), p_off.data(), p_all.start.data(), p_all.end.data(),
                                      p_all.label.data(), opt, threads);
    } catch (const std::invalid_argument&) {
        // Only method "dp" on spans that are not flat may refuse; anything else is a finding.
        if (opt.method != AlignMethod::DynamicProgramme) fuzz::fail("align_batch refused a valid record");
        return 0;
    }
    if (out.pair_offsets.size() != n_records + 1) fuzz::fail("pair_offsets has the wrong length");
    for (std::size_t r = 0; r < n_records; ++r) {
        const Side& g = gold[r];
        const Side& p = pred[r];
        const std::size_t n = g.start.size(), m = p.start.size();
        const double k = static_cast<double>(std::min(n, m));
        std::vector<double> w(n * m);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j) w[i * m + j] = weight(g, i, p, j, opt, k);
        std::vector<char> g_used(n, 0), p_used(m, 0);
        double total = 0.0;
        int64_t previous_gold = -1;
        for (int64_t e = out.pair_offsets[r]; e < out.pair_offsets[r + 1]; ++e) {
            const int64_t i = out.gold_index[e], j = out.pred_index[e];
            if (i < 0 || j < 0 || static_cast<std::size_t>(i) >= n || static_cast<std::size_t>(j) >= m)
                fuzz::fail("pair index out of range");
            if (g_used[i]++ || p_used[j]++) fuzz::fail("a span is matched twice");
            if (i <= previous_gold) fuzz::fail("pairs are not sorted by gold index");
            previous_gold = i;
            const double x = w[i * m + j];
            if (!(x > 0)) fuzz::fail("a pair of weight 0 was matched");
            if (out.jaccard[e] != jaccard(g.start[i], g.end[i], p.start[j], p.end[j]))
                fuzz::fail("reported Jaccard differs from the reference");
            total += x;
        }
        const bool flat = is_flat(g) && is_flat(p);
        if (flat && opt.method != AlignMethod::Assignment) {
            // The dynamic programme ran: exactly the dense table's pairs, ties included.
            const auto want = dense_dp_pairs(n, m, w);
            const int64_t count = out.pair_offsets[r + 1] - out.pair_offsets[r];
            if (static_cast<std::size_t>(count) != want.size()) fuzz::fail("DP pairs differ from the dense table's");
            for (int64_t e = 0; e < count; ++e) {
                const int64_t at = out.pair_offsets[r] + e;
                if (out.gold_index[at] != want[e].first || out.pred_index[at] != want[e].second)
                    fuzz::fail("DP pairs differ from the dense table's");
            }
            // The O((n + m) log m) fallback for huge blocks: same optimum (ties may differ).
            const rapidscore::SpanView gv{g.start.data(), g.end.data(), g.label.data(), n};
            const rapidscore::SpanView pv{p.start.data(), p.end.data(), p.label.data(), m};
            std::vector<std::pair<std::size_t, std::size_t>> sparse;
            rapidscore::align_flat_sparse(gv, pv, [&](std::size_t i, std::size_t j) { return w[i * m + j]; }, sparse);
            double sparse_total = 0.0, dense_total = 0.0;
            for (const auto& pr : sparse) {
                if (!(w[pr.first * m + pr.second] > 0)) fuzz::fail("sparse DP matched a pair of weight 0");
                sparse_total += w[pr.first * m + pr.second];
            }
            for (const auto& pr : want) dense_total += w[pr.first * m + pr.second];
            if (std::fabs(sparse_total - dense_total) > 1e-9 * std::max(1.0, dense_total))
                fuzz::fail("sparse DP total differs from the dense table's");
        }
        if (n <= 7 && m <= 7) {
            const double best = exhaustive_best(0, n, m, 0u, w);
            if (std::fabs(total - best) > 1e-9 * std::max(1.0, best)) fuzz::fail("total weight is not the optimum");
        } else if (!flat) {
            fuzz::fail("large records are generated flat");
        }
    }
    return 0;
}

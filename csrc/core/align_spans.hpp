// Python-free span alignment for NER evaluation (DMBertA and the SemEval-2013 schemes).
//
// A record holds gold spans and predicted spans, character offsets with exclusive ends. Alignment
// is a one-to-one matching maximising the sum of pair weights, only pairs with positive weight
// allowed. When neither side has overlapping spans (both "flat": sorted, disjoint), no two
// positive-weight pairs can cross, so the DJA dynamic programme over the two sorted lists is
// optimal; otherwise the assignment problem is solved exactly (Hungarian algorithm).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel.hpp"

namespace rapidscore {

// How a pair's weight is computed.
//   Jaccard: w = J (character Jaccard), eligible when J > 0 and J >= min_jaccard (DMBertA).
//   SemEval schemes: eligible when the overlap covers at least min_overlap_percent of the gold span
//   (nervaluate's rule); w = [correct] * A + B + J, which maximises, in this order, the number of
//   correct pairs, the number of matched pairs, then the total Jaccard.
enum class AlignScheme : int { Jaccard = 0, Strict = 1, Exact = 2, Partial = 3, Type = 4 };
enum class AlignMethod : int { Auto = 0, DynamicProgramme = 1, Assignment = 2 };

struct SpanView {
    const std::int64_t* start;
    const std::int64_t* end;
    const std::int64_t* label;  // may be null for the Jaccard scheme
    std::size_t n;
};

inline double span_jaccard(std::int64_t gs, std::int64_t ge, std::int64_t ps, std::int64_t pe) {
    const std::int64_t inter = std::min(ge, pe) - std::max(gs, ps);
    if (inter <= 0) return 0.0;
    const std::int64_t uni = (ge - gs) + (pe - ps) - inter;
    return static_cast<double>(inter) / static_cast<double>(uni);
}

// Sorted by start and pairwise disjoint (end exclusive).
inline bool spans_are_flat(const SpanView& s) {
    for (std::size_t i = 1; i < s.n; ++i) {
        if (s.start[i] < s.end[i - 1] || s.start[i] < s.start[i - 1]) return false;
    }
    return true;
}

struct AlignOptions {
    AlignScheme scheme = AlignScheme::Jaccard;
    AlignMethod method = AlignMethod::Auto;
    double min_jaccard = 0.0;
    double min_overlap_percent = 1.0;
};

// Weight of pair (gold i, pred j); 0 means "may not be matched".
inline double pair_weight(const SpanView& g, std::size_t i, const SpanView& p, std::size_t j,
                          const AlignOptions& opt, double big_a, double big_b) {
    const std::int64_t gs = g.start[i], ge = g.end[i], ps = p.start[j], pe = p.end[j];
    const double jac = span_jaccard(gs, ge, ps, pe);
    if (opt.scheme == AlignScheme::Jaccard) {
        return (jac > 0.0 && jac >= opt.min_jaccard) ? jac : 0.0;
    }
    const bool same_bounds = gs == ps && ge == pe;
    // nervaluate's overlap test, inclusive ends: (overlap_span / true_span) * 100.0 >= threshold.
    bool eligible = same_bounds && ge > gs;
    if (!eligible && jac > 0.0) {
        const double overlap = static_cast<double>(std::min(ge, pe) - std::max(gs, ps));
        const double gold_len = static_cast<double>(ge - gs);
        eligible = (overlap / gold_len) * 100.0 >= opt.min_overlap_percent;
    }
    if (!eligible) return 0.0;
    const bool same_label = g.label[i] == p.label[j];
    bool correct = false;
    switch (opt.scheme) {
        case AlignScheme::Strict: correct = same_bounds && same_label; break;
        case AlignScheme::Exact: correct = same_bounds; break;
        case AlignScheme::Partial: correct = same_bounds; break;
        case AlignScheme::Type: correct = same_label; break;
        default: break;
    }
    return (correct ? big_a : 0.0) + big_b + jac;
}

// Scratch buffers reused across records by one thread.
struct AlignScratch {
    std::vector<double> weight, u, v, minv;
    std::vector<std::ptrdiff_t> way, assigned;
    std::vector<char> used;
};

// Maximum-weight matching of flat spans (both sides sorted and disjoint), where no two
// positive-weight pairs cross, so a matching is a chain of pairs increasing in both indices:
// best(i, j) = w(i, j) + max{best(i', j') : i' < i, j' < j}. Only overlapping pairs can have a
// positive weight, and two flat lists have at most n + m - 1 overlapping pairs, found by one
// sweep (the predictions that can overlap gold i start at the first one ending after gold i's
// start; that index only grows). A Fenwick tree over prediction indices answers the prefix
// maxima, so the time is O((n + m) log m) and the memory O(n + m): a record with 200,000 flat
// spans per side aligns in milliseconds (the dense DJA table it replaces was (n + 1)(m + 1) cells).
// Ties between equally good matchings may be broken differently from the dense table; the
// total weight is the same. Appends pairs in increasing order.
template <typename Weight>
inline void align_flat_sparse(const SpanView& g, const SpanView& p, Weight&& weight,
                              std::vector<std::pair<std::size_t, std::size_t>>& out) {
    const std::size_t n = g.n, m = p.n;
    struct Edge {
        std::size_t i, j;
        double value;          // best chain ending with this pair
        std::ptrdiff_t parent;  // previous pair of that chain (-1: none)
    };
    std::vector<Edge> edges;
    // Fenwick tree of prefix maxima over prediction index (1-based): value and edge index.
    std::vector<double> tree_value(m + 1, 0.0);
    std::vector<std::ptrdiff_t> tree_edge(m + 1, -1);
    auto query = [&](std::size_t j) {  // best over predictions [0, j)
        double best = 0.0;
        std::ptrdiff_t at = -1;
        for (std::size_t k = j; k > 0; k &= k - 1)
            if (tree_value[k] > best) { best = tree_value[k]; at = tree_edge[k]; }
        return std::make_pair(best, at);
    };
    auto update = [&](std::size_t j, double value, std::ptrdiff_t edge) {  // prediction j (0-based)
        for (std::size_t k = j + 1; k <= m; k += k & (~k + 1))
            if (value > tree_value[k]) { tree_value[k] = value; tree_edge[k] = edge; }
    };
    std::size_t first = 0;
    double best_total = 0.0;
    std::ptrdiff_t best_edge = -1;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t gs = g.start[i], ge = g.end[i];
        while (first < m && p.end[first] <= gs) ++first;
        const std::size_t row_begin = edges.size();
        // Queries of the whole row first: a chain may not use gold i twice.
        for (std::size_t j = first; j < m && p.start[j] < ge; ++j) {
            const double w = weight(i, j);
            if (!(w > 0.0)) continue;
            const auto prev = query(j);
            edges.push_back(Edge{i, j, prev.first + w, prev.second});
        }
        for (std::size_t e = row_begin; e < edges.size(); ++e) {
            update(edges[e].j, edges[e].value, static_cast<std::ptrdiff_t>(e));
            if (edges[e].value > best_total) { best_total = edges[e].value; best_edge = static_cast<std::ptrdiff_t>(e); }
        }
    }
    const std::size_t begin = out.size();
    for (std::ptrdiff_t e = best_edge; e >= 0; e = edges[static_cast<std::size_t>(e)].parent)
        out.emplace_back(edges[static_cast<std::size_t>(e)].i, edges[static_cast<std::size_t>(e)].j);
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(begin), out.end());
}

// The assignment solver needs an n x m weight matrix and O(min^2 max) time. Records with
// overlapping spans beyond this many gold x predicted pairs (2048 x 2048: 32 MiB of weights,
// about 3 s) are refused with a clear error instead of growing without bound.
constexpr double kMaxAssignmentPairs = 4194304.0;

// Exact maximum-weight matching (Hungarian algorithm with potentials, O(r^2 c), r <= c) on the
// weight matrix; pairs of weight 0 that fill the assignment are dropped. Weights are >= 0, so a
// full assignment of the smaller side of maximum total weight is a maximum-weight matching.
inline void align_assignment(std::size_t n, std::size_t m, AlignScratch& s,
                             std::vector<std::pair<std::size_t, std::size_t>>& out) {
    if (n == 0 || m == 0) return;
    const bool transpose = n > m;
    const std::size_t rows = transpose ? m : n, cols = transpose ? n : m;
    auto cost = [&](std::size_t r, std::size_t c) {  // 1-based rows/cols, minimisation
        const std::size_t gi = transpose ? c - 1 : r - 1, pj = transpose ? r - 1 : c - 1;
        return -s.weight[gi * m + pj];
    };
    const double inf = std::numeric_limits<double>::infinity();
    s.u.assign(rows + 1, 0.0);
    s.v.assign(cols + 1, 0.0);
    s.way.assign(cols + 1, 0);
    s.assigned.assign(cols + 1, 0);  // assigned[c] = row matched to column c (0: none)
    for (std::size_t r = 1; r <= rows; ++r) {
        s.assigned[0] = static_cast<std::ptrdiff_t>(r);
        std::size_t c0 = 0;
        s.minv.assign(cols + 1, inf);
        s.used.assign(cols + 1, 0);
        do {
            s.used[c0] = 1;
            const std::size_t r0 = static_cast<std::size_t>(s.assigned[c0]);
            double delta = inf;
            std::size_t c1 = 0;
            for (std::size_t c = 1; c <= cols; ++c) {
                if (s.used[c]) continue;
                const double cur = cost(r0, c) - s.u[r0] - s.v[c];
                if (cur < s.minv[c]) { s.minv[c] = cur; s.way[c] = static_cast<std::ptrdiff_t>(c0); }
                if (s.minv[c] < delta) { delta = s.minv[c]; c1 = c; }
            }
            for (std::size_t c = 0; c <= cols; ++c) {
                if (s.used[c]) {
                    s.u[static_cast<std::size_t>(s.assigned[c])] += delta;
                    s.v[c] -= delta;
                } else {
                    s.minv[c] -= delta;
                }
            }
            c0 = c1;
        } while (s.assigned[c0] != 0);
        do {
            const std::size_t c1 = static_cast<std::size_t>(s.way[c0]);
            s.assigned[c0] = s.assigned[c1];
            c0 = c1;
        } while (c0 != 0);
    }
    const std::size_t first = out.size();
    for (std::size_t c = 1; c <= cols; ++c) {
        if (s.assigned[c] == 0) continue;
        const std::size_t r = static_cast<std::size_t>(s.assigned[c]);
        const std::size_t gi = transpose ? c - 1 : r - 1, pj = transpose ? r - 1 : c - 1;
        if (s.weight[gi * m + pj] > 0.0) out.emplace_back(gi, pj);
    }
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

// Aligns one record; appends matched (gold index, pred index) pairs sorted by gold index.
// Returns true when the dynamic programme was used, false for the assignment solver.
inline bool align_record(const SpanView& g, const SpanView& p, const AlignOptions& opt, AlignScratch& s,
                         std::vector<std::pair<std::size_t, std::size_t>>& out) {
    const std::size_t n = g.n, m = p.n;
    const bool flat = spans_are_flat(g) && spans_are_flat(p);
    if (opt.method == AlignMethod::DynamicProgramme && !flat)
        throw std::invalid_argument("the dynamic programme needs sorted, non-overlapping spans on both sides");
    const bool use_dp = opt.method == AlignMethod::Assignment ? false : flat;
    if (n == 0 || m == 0) return use_dp;
    const double k = static_cast<double>(std::min(n, m));
    const double big_b = k + 1.0;                  // > any total Jaccard
    const double big_a = (k + 1.0) * (big_b + 1.0);  // > any total of (B + J) terms
    if (use_dp) {
        align_flat_sparse(g, p, [&](std::size_t i, std::size_t j) { return pair_weight(g, i, p, j, opt, big_a, big_b); },
                          out);
        return true;
    }
    if (static_cast<double>(n) * static_cast<double>(m) > kMaxAssignmentPairs)
        throw std::invalid_argument(
            std::to_string(n) + " gold x " + std::to_string(m) +
            " predicted spans with overlaps need the assignment solver, which is limited to " +
            std::to_string(static_cast<long long>(kMaxAssignmentPairs)) +
            " span pairs per record (O(n m) memory, O(min(n,m)^2 max(n,m)) time); split the record, "
            "or remove overlapping spans so that the linear-time dynamic programme applies");
    s.weight.assign(n * m, 0.0);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) s.weight[i * m + j] = pair_weight(g, i, p, j, opt, big_a, big_b);
    align_assignment(n, m, s, out);
    return false;
}

struct BatchAlignment {
    std::vector<std::int64_t> pair_offsets;  // n_records + 1
    std::vector<std::int64_t> gold_index, pred_index;  // within-record indices
    std::vector<double> jaccard;
    std::vector<unsigned char> used_dp;  // per record
};

// Aligns every record of a batch (CSR layout: record r owns spans offsets[r] .. offsets[r+1]).
// Offsets and spans must have been validated by the caller.
inline BatchAlignment align_batch(std::size_t n_records, const std::int64_t* gold_offsets,
                                  const std::int64_t* gold_start, const std::int64_t* gold_end,
                                  const std::int64_t* gold_label, const std::int64_t* pred_offsets,
                                  const std::int64_t* pred_start, const std::int64_t* pred_end,
                                  const std::int64_t* pred_label, const AlignOptions& opt, int n_threads) {
    // Each record writes into its own slice of size min(n, m), compacted afterwards.
    std::vector<std::int64_t> slot(n_records + 1, 0);
    for (std::size_t r = 0; r < n_records; ++r) {
        const std::int64_t n = gold_offsets[r + 1] - gold_offsets[r];
        const std::int64_t m = pred_offsets[r + 1] - pred_offsets[r];
        slot[r + 1] = slot[r] + std::min(n, m);
    }
    const std::size_t capacity = static_cast<std::size_t>(slot[n_records]);
    std::vector<std::int64_t> gi(capacity), pj(capacity), count(n_records, 0);
    BatchAlignment result;
    result.used_dp.assign(n_records, 0);
    parallel_for(
        n_records, n_threads,
        [&](std::size_t r) {
            thread_local AlignScratch scratch;
            thread_local std::vector<std::pair<std::size_t, std::size_t>> pairs;
            pairs.clear();
            const std::int64_t g0 = gold_offsets[r], p0 = pred_offsets[r];
            SpanView g{gold_start + g0, gold_end + g0, gold_label ? gold_label + g0 : nullptr,
                       static_cast<std::size_t>(gold_offsets[r + 1] - g0)};
            SpanView p{pred_start + p0, pred_end + p0, pred_label ? pred_label + p0 : nullptr,
                       static_cast<std::size_t>(pred_offsets[r + 1] - p0)};
            try {
                result.used_dp[r] = align_record(g, p, opt, scratch, pairs) ? 1 : 0;
            } catch (const std::invalid_argument& e) {
                throw std::invalid_argument("record " + std::to_string(r) + ": " + e.what());
            }
            std::int64_t at = slot[r];
            for (const auto& pr : pairs) {
                gi[static_cast<std::size_t>(at)] = static_cast<std::int64_t>(pr.first);
                pj[static_cast<std::size_t>(at)] = static_cast<std::int64_t>(pr.second);
                ++at;
            }
            count[r] = at - slot[r];
        },
        64);
    result.pair_offsets.assign(n_records + 1, 0);
    for (std::size_t r = 0; r < n_records; ++r) result.pair_offsets[r + 1] = result.pair_offsets[r] + count[r];
    const std::size_t total = static_cast<std::size_t>(result.pair_offsets[n_records]);
    result.gold_index.resize(total);
    result.pred_index.resize(total);
    result.jaccard.resize(total);
    for (std::size_t r = 0; r < n_records; ++r) {
        std::int64_t src = slot[r], dst = result.pair_offsets[r];
        for (std::int64_t k = 0; k < count[r]; ++k, ++src, ++dst) {
            const std::int64_t g = gold_offsets[r] + gi[static_cast<std::size_t>(src)];
            const std::int64_t p = pred_offsets[r] + pj[static_cast<std::size_t>(src)];
            result.gold_index[static_cast<std::size_t>(dst)] = gi[static_cast<std::size_t>(src)];
            result.pred_index[static_cast<std::size_t>(dst)] = pj[static_cast<std::size_t>(src)];
            result.jaccard[static_cast<std::size_t>(dst)] =
                span_jaccard(gold_start[g], gold_end[g], pred_start[p], pred_end[p]);
        }
    }
    return result;
}

}  // namespace rapidscore

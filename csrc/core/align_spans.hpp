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

// A block of flat spans: gold rows [r0, r1) and predictions [c0, c1) (0-based) that overlap only
// each other; table holds its part of the DJA table ((r1 - r0 + 1) x (c1 - c0 + 1) cells from
// offset `table` of the scratch), boundaries seeded with the value of everything before it.
struct FlatBlock {
    std::size_t r0, r1, c0, c1;
    double seed;
    std::size_t table;
};

// Scratch buffers reused across records by one thread.
struct AlignScratch {
    std::vector<double> weight, u, v, minv;
    std::vector<std::ptrdiff_t> way, assigned;
    std::vector<char> used;
    std::vector<FlatBlock> blocks;
    std::vector<std::size_t> row_block, col_block;
    std::vector<double> tables;
    std::vector<std::pair<std::int64_t, std::size_t>> order;  // (start, 2 * index + side)
    std::vector<std::size_t> cluster_gold, cluster_pred;
    std::vector<std::pair<std::size_t, std::size_t>> local;
};

// Cells of the block tables above which a flat record is aligned by align_flat_sparse instead
// (2^23 doubles: 64 MiB per thread; only a single run of ~3,000 x 3,000 mutually chained spans
// gets there, real records have blocks of a few spans).
constexpr std::size_t kMaxFlatBlockCells = std::size_t(1) << 23;

// The DJA dynamic programme on flat spans, DJA(i, j) = max(DJA(i-1, j), DJA(i, j-1),
// DJA(i-1, j-1) + w(i, j)) with its back-pointer rule (skip a gold span on ties, else skip a
// prediction if strictly better, else match if strictly better), computed exactly but without
// the (n + 1)(m + 1) table. Flat spans split into blocks (a run of golds and predictions chained
// by overlaps, in the same order on both sides); w = 0 between blocks, so every cell of the full
// table outside the blocks' own rectangles equals a cell on a block's last row or column (or the
// value before a span-less block), and inside a rectangle it equals the block's table seeded
// with the value of everything before it, to the bit (the same additions in the same order).
// The trace-back walks the full table through those values: the same pairs, ties included, as
// the dense programme, in O(n + m + sum of block areas) time and memory. Returns false (nothing
// appended) when the blocks would need more than kMaxFlatBlockCells cells.
template <typename Weight>
inline bool align_flat_blocks(const SpanView& g, const SpanView& p, Weight&& weight, AlignScratch& s,
                              std::vector<std::pair<std::size_t, std::size_t>>& out) {
    const std::size_t n = g.n, m = p.n;
    auto& blocks = s.blocks;
    blocks.clear();
    s.row_block.assign(n, 0);
    s.col_block.assign(m, 0);
    std::size_t next_col = 0, first = 0, cells = 0;
    bool open = false;
    FlatBlock cur{0, 0, 0, 0, 0.0, 0};
    auto close_open = [&]() {
        if (!open) return;
        blocks.push_back(cur);
        next_col = cur.c1;
        open = false;
    };
    auto prediction_blocks_until = [&](std::size_t col, std::size_t row) {  // predictions overlapping nothing
        for (; next_col < col; ++next_col) blocks.push_back(FlatBlock{row, row, next_col, next_col + 1, 0.0, 0});
    };
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t gs = g.start[i], ge = g.end[i];
        while (first < m && p.end[first] <= gs) ++first;
        std::size_t hi = first;
        while (hi < m && p.start[hi] < ge) ++hi;
        const std::size_t lo = std::max(first, open ? cur.c0 : next_col);
        if (lo >= hi) {  // overlaps no prediction: a block of one gold span
            close_open();
            blocks.push_back(FlatBlock{i, i + 1, next_col, next_col, 0.0, 0});
        } else if (open && lo < cur.c1) {
            cur.r1 = i + 1;
            cur.c1 = std::max(cur.c1, hi);
        } else {
            close_open();
            prediction_blocks_until(lo, i);
            cur = FlatBlock{i, i + 1, lo, hi, 0.0, 0};
            open = true;
        }
    }
    close_open();
    prediction_blocks_until(m, n);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const FlatBlock& blk = blocks[b];
        for (std::size_t r = blk.r0; r < blk.r1; ++r) s.row_block[r] = b;
        for (std::size_t c = blk.c0; c < blk.c1; ++c) s.col_block[c] = b;
        if (blk.r1 > blk.r0 && blk.c1 > blk.c0) cells += (blk.r1 - blk.r0 + 1) * (blk.c1 - blk.c0 + 1);
        if (cells > kMaxFlatBlockCells) return false;
    }
    // Block tables, each seeded with the final value of the blocks before it.
    s.tables.resize(cells);
    double running = 0.0;
    std::size_t at = 0;
    for (FlatBlock& blk : blocks) {
        blk.seed = running;
        const std::size_t rows = blk.r1 - blk.r0, cols = blk.c1 - blk.c0;
        if (rows == 0 || cols == 0) continue;
        blk.table = at;
        double* t = s.tables.data() + at;
        const std::size_t w = cols + 1;
        for (std::size_t j = 0; j <= cols; ++j) t[j] = running;
        for (std::size_t i = 1; i <= rows; ++i) {
            t[i * w] = running;
            for (std::size_t j = 1; j <= cols; ++j) {
                double best = t[(i - 1) * w + j];
                const double left = t[i * w + j - 1];
                if (left > best) best = left;
                const double x = weight(blk.r0 + i - 1, blk.c0 + j - 1);
                if (x > 0.0) {
                    const double diag = t[(i - 1) * w + j - 1] + x;
                    if (diag > best) best = diag;
                }
                t[i * w + j] = best;
            }
        }
        running = t[rows * w + cols];
        at += (rows + 1) * w;
    }
    // Cell (i, j) of the full (n + 1) x (m + 1) table.
    auto value = [&](std::size_t i, std::size_t j) -> double {
        if (i == 0 || j == 0) return 0.0;
        const std::size_t a = s.row_block[i - 1], b = s.col_block[j - 1];
        const FlatBlock& blk = blocks[std::min(a, b)];
        const std::size_t rows = blk.r1 - blk.r0, cols = blk.c1 - blk.c0;
        if (rows == 0 || cols == 0) return blk.seed;
        const std::size_t li = a <= b ? i - blk.r0 : rows;  // later columns: the block's last column
        const std::size_t lj = b <= a ? j - blk.c0 : cols;  // later rows: its last row
        return s.tables[blk.table + li * (cols + 1) + lj];
    };
    const std::size_t begin = out.size();
    std::size_t i = n, j = m;
    while (i > 0 && j > 0) {
        const double up = value(i - 1, j), left = value(i, j - 1);
        double best = up;
        int from = 1;
        if (left > best) { best = left; from = 2; }
        if (s.row_block[i - 1] == s.col_block[j - 1]) {
            const double x = weight(i - 1, j - 1);
            if (x > 0.0 && value(i - 1, j - 1) + x > best) from = 3;
        }
        if (from == 3) {
            out.emplace_back(i - 1, j - 1);
            --i; --j;
        } else if (from == 1) {
            --i;
        } else {
            --j;
        }
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(begin), out.end());
    return true;
}

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

// The assignment solver needs an n x m weight matrix and O(min^2 max) time per cluster of
// overlapping spans. Clusters beyond this many gold x predicted pairs (2048 x 2048: 32 MiB of
// weights, seconds of time) are refused with a clear error instead of growing without bound.
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
        auto weight = [&](std::size_t i, std::size_t j) { return pair_weight(g, i, p, j, opt, big_a, big_b); };
        if (!align_flat_blocks(g, p, weight, s, out)) align_flat_sparse(g, p, weight, out);
        return true;
    }
    // Clusters: maximal runs of positions covered by chained spans of either side. Spans of two
    // clusters never overlap, so every positive-weight pair lies inside one cluster, and the
    // maximum-weight matching is the union of the clusters' (for the SemEval schemes too: the
    // lexicographic objective is a sum over clusters). Each cluster is solved alone, and bounded.
    s.order.clear();
    for (std::size_t i = 0; i < n; ++i) s.order.emplace_back(g.start[i], 2 * i);
    for (std::size_t j = 0; j < m; ++j) s.order.emplace_back(p.start[j], 2 * j + 1);
    std::sort(s.order.begin(), s.order.end());
    const std::size_t first = out.size();
    std::size_t at = 0;
    while (at < s.order.size()) {
        s.cluster_gold.clear();
        s.cluster_pred.clear();
        std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
        do {
            const std::size_t code = s.order[at].second, idx = code / 2;
            const bool pred = code % 2 == 1;
            (pred ? s.cluster_pred : s.cluster_gold).push_back(idx);
            max_end = std::max(max_end, pred ? p.end[idx] : g.end[idx]);
            ++at;
        } while (at < s.order.size() && s.order[at].first < max_end);
        const std::size_t cn = s.cluster_gold.size(), cm = s.cluster_pred.size();
        if (cn == 0 || cm == 0) continue;
        if (static_cast<double>(cn) * static_cast<double>(cm) > kMaxAssignmentPairs)
            throw std::invalid_argument(
                "a cluster of " + std::to_string(cn) + " gold x " + std::to_string(cm) +
                " predicted overlapping spans needs the assignment solver, which is limited to " +
                std::to_string(static_cast<long long>(kMaxAssignmentPairs)) +
                " span pairs per cluster (O(n m) memory, O(min(n,m)^2 max(n,m)) time); split the record, "
                "or remove overlapping spans so that the linear-time dynamic programme applies");
        s.weight.assign(cn * cm, 0.0);
        for (std::size_t a = 0; a < cn; ++a)
            for (std::size_t b = 0; b < cm; ++b)
                s.weight[a * cm + b] = pair_weight(g, s.cluster_gold[a], p, s.cluster_pred[b], opt, big_a, big_b);
        s.local.clear();
        align_assignment(cn, cm, s, s.local);
        for (const auto& pr : s.local) out.emplace_back(s.cluster_gold[pr.first], s.cluster_pred[pr.second]);
    }
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
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

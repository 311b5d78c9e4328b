"""Pure-Python twin of the native span alignment (``rapidscore._core.alignment``,
csrc/core/align_spans.hpp and csrc/bindings/register_alignment.cpp).

Same contract as the native ``align_spans_batch``: the same arguments, checks and messages, and
the same pairs. It follows the C++ step by step (the pair weights in the same floating-point
operations, the block-wise DJA dynamic programme with its back-pointer rule, the sparse chain
programme for huge flat records, the clusters of overlapping spans and the Hungarian algorithm
with potentials), so where several matchings have the maximum weight it picks the same one.
:mod:`rapidscore.kernels.alignment` runs it when ``RAPIDSCORE_IMPLEMENTATION`` selects the
Python twins or the extension cannot be imported. It runs on one thread (``n_threads`` is
checked, then ignored).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

__all__ = ["align_spans_batch", "SCHEMES", "METHODS"]

SCHEMES = ("jaccard", "strict", "exact", "partial", "type")
METHODS = ("auto", "dp", "assignment")

# csrc/core/align_spans.hpp: kMaxFlatBlockCells, kMaxAssignmentPairs; csrc/core/parallel.hpp: kMaxThreads
MAX_FLAT_BLOCK_CELLS = 1 << 23
MAX_ASSIGNMENT_PAIRS = 4194304.0
MAX_THREADS = 1024
_INT64_MAX = np.iinfo(np.int64).max

Pairs = list[tuple[int, int]]
Weight = Callable[[int, int], float]


# -- argument checks (csrc/bindings/arrays.hpp, register_alignment.cpp) -------------------------


def thread_count(value, name: str, allow_negative: bool) -> int:
    """A thread-count argument as the native bindings take it: an int (not bool) <= 1024;
    ``allow_negative``: values <= 0 mean all threads, else 0 does and < 0 is refused."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value)}")
    bounds = "<= 1024 (<= 0: all hardware threads)" if allow_negative else "in [0, 1024] (0: all hardware threads)"
    if value > MAX_THREADS or value < -(_INT64_MAX + 1) or (not allow_negative and value < 0):
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return max(int(value), 0)


def str_arg(value, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} is not valid Unicode text (it holds a lone surrogate)") from None
    return value


def real_arg(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (float, int, numbers.Real)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    return float(value)


def _int_array_like(value, name: str) -> np.ndarray:
    """A one-dimensional int64 copy of an integer array-like (lists included); floats refused."""
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError):
        raise TypeError(f"{name} must be convertible to an int64 array") from None
    if raw.dtype.kind not in "iu" and raw.size > 0:  # an empty list is float64 to numpy: fine
        raise TypeError(f"{name} must hold integers, got dtype {raw.dtype}")
    try:
        array = raw.astype(np.int64)  # as the native forcecast (uint64 above INT64_MAX wraps)
    except (ValueError, TypeError):
        raise TypeError(f"{name} must be convertible to an int64 array") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    return array


def _validate_side(side: str, offsets: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   labels: np.ndarray | None) -> None:
    if len(offsets) < 1:
        raise ValueError(f"{side}_offsets must hold n_records + 1 values")
    if len(starts) != len(ends):
        raise ValueError(f"{side}_starts and {side}_ends differ in length")
    if labels is not None and len(labels) != len(starts):
        raise ValueError(f"{side}_labels and {side}_starts differ in length")
    if offsets[0] != 0:
        raise ValueError(f"{side}_offsets must start at 0")
    if offsets[-1] != len(starts):
        raise ValueError(f"{side}_offsets must end at the number of spans ({len(starts)}), got {offsets[-1]}")
    decreasing = np.flatnonzero(offsets[1:] < offsets[:-1])
    if decreasing.size:
        raise ValueError(f"{side}_offsets decrease at record {decreasing[0]}")
    bad = np.flatnonzero((starts < 0) | (ends < starts))
    if bad.size:
        k = int(bad[0])
        record = int(np.searchsorted(offsets, k, side="right")) - 1
        raise ValueError(f"record {record}: {side} span {k - int(offsets[record])} has invalid offsets "
                         f"({starts[k]}, {ends[k]}); need 0 <= start <= end")


# -- one record (csrc/core/align_spans.hpp) ----------------------------------------------------


def span_jaccard(gs: int, ge: int, ps: int, pe: int) -> float:
    inter = min(ge, pe) - max(gs, ps)
    if inter <= 0:
        return 0.0
    union = (ge - gs) + (pe - ps) - inter
    return float(inter) / float(union)


def _is_flat(starts: list[int], ends: list[int]) -> bool:
    """Sorted by start and pairwise disjoint (end exclusive)."""
    return all(starts[i] >= ends[i - 1] and starts[i] >= starts[i - 1] for i in range(1, len(starts)))


class _Record:
    """One record's spans (Python ints) and the options: ``weight(i, j)`` is pair_weight."""

    def __init__(self, gold: tuple[list[int], list[int], list[int] | None],
                 pred: tuple[list[int], list[int], list[int] | None], scheme: str,
                 min_jaccard: float, min_overlap_percent: float):
        self.gs, self.ge, self.gl = gold
        self.ps, self.pe, self.pl = pred
        self.scheme, self.min_jaccard, self.min_overlap_percent = scheme, min_jaccard, min_overlap_percent
        k = float(min(len(self.gs), len(self.ps)))
        self.big_b = k + 1.0  # > any total Jaccard
        self.big_a = (k + 1.0) * (self.big_b + 1.0)  # > any total of (B + J) terms

    def weight(self, i: int, j: int) -> float:
        """Weight of pair (gold i, pred j); 0 means "may not be matched"."""
        gs, ge, ps, pe = self.gs[i], self.ge[i], self.ps[j], self.pe[j]
        jac = span_jaccard(gs, ge, ps, pe)
        if self.scheme == "jaccard":
            return jac if (jac > 0.0 and jac >= self.min_jaccard) else 0.0
        same_bounds = gs == ps and ge == pe
        # nervaluate's overlap test: (overlap_span / true_span) * 100.0 >= threshold
        eligible = same_bounds and ge > gs
        if not eligible and jac > 0.0:
            overlap = float(min(ge, pe) - max(gs, ps))
            eligible = (overlap / float(ge - gs)) * 100.0 >= self.min_overlap_percent
        if not eligible:
            return 0.0
        assert self.gl is not None and self.pl is not None
        same_label = self.gl[i] == self.pl[j]
        if self.scheme == "strict":
            correct = same_bounds and same_label
        elif self.scheme == "type":
            correct = same_label
        else:  # exact, partial
            correct = same_bounds
        return (self.big_a if correct else 0.0) + self.big_b + jac


def _align_flat_blocks(rec: _Record) -> Pairs | None:
    """align_flat_blocks: the DJA programme computed block by block, its trace-back through the
    full table's values (ties as the dense table breaks them). None when the blocks would need
    more than MAX_FLAT_BLOCK_CELLS cells."""
    gs, ge, ps, pe, weight = rec.gs, rec.ge, rec.ps, rec.pe, rec.weight
    n, m = len(gs), len(ps)
    blocks: list[list] = []  # [r0, r1, c0, c1, seed, table]
    row_block, col_block = [0] * n, [0] * m
    next_col = first = 0
    cur: list = [0, 0, 0, 0, 0.0, None]
    is_open = False

    def close_open() -> None:
        nonlocal next_col, is_open
        if is_open:
            blocks.append(cur)
            next_col = cur[3]
            is_open = False

    def prediction_blocks_until(col: int, row: int) -> None:  # predictions overlapping nothing
        nonlocal next_col
        while next_col < col:
            blocks.append([row, row, next_col, next_col + 1, 0.0, None])
            next_col += 1

    for i in range(n):
        g_start, g_end = gs[i], ge[i]
        while first < m and pe[first] <= g_start:
            first += 1
        hi = first
        while hi < m and ps[hi] < g_end:
            hi += 1
        lo = max(first, cur[2] if is_open else next_col)
        if lo >= hi:  # overlaps no prediction: a block of one gold span
            close_open()
            blocks.append([i, i + 1, next_col, next_col, 0.0, None])
        elif is_open and lo < cur[3]:
            cur[1] = i + 1
            cur[3] = max(cur[3], hi)
        else:
            close_open()
            prediction_blocks_until(lo, i)
            cur = [i, i + 1, lo, hi, 0.0, None]
            is_open = True
    close_open()
    prediction_blocks_until(m, n)
    cells = 0
    for b, (r0, r1, c0, c1, _, _) in enumerate(blocks):
        for r in range(r0, r1):
            row_block[r] = b
        for c in range(c0, c1):
            col_block[c] = b
        if r1 > r0 and c1 > c0:
            cells += (r1 - r0 + 1) * (c1 - c0 + 1)
        if cells > MAX_FLAT_BLOCK_CELLS:
            return None
    # Block tables, each seeded with the final value of the blocks before it.
    running = 0.0
    for blk in blocks:
        blk[4] = running
        r0, r1, c0, c1 = blk[:4]
        rows, cols = r1 - r0, c1 - c0
        if rows == 0 or cols == 0:
            continue
        w = cols + 1
        t = [running] * ((rows + 1) * w)
        for i in range(1, rows + 1):
            for j in range(1, cols + 1):
                best = t[(i - 1) * w + j]
                left = t[i * w + j - 1]
                if left > best:
                    best = left
                x = weight(r0 + i - 1, c0 + j - 1)
                if x > 0.0:
                    diag = t[(i - 1) * w + j - 1] + x
                    if diag > best:
                        best = diag
                t[i * w + j] = best
        running = t[rows * w + cols]
        blk[5] = t

    def value(i: int, j: int) -> float:  # cell (i, j) of the full (n + 1) x (m + 1) table
        if i == 0 or j == 0:
            return 0.0
        a, b = row_block[i - 1], col_block[j - 1]
        r0, r1, c0, c1, seed, table = blocks[min(a, b)]
        rows, cols = r1 - r0, c1 - c0
        if rows == 0 or cols == 0:
            return seed
        li = i - r0 if a <= b else rows  # later columns: the block's last column
        lj = j - c0 if b <= a else cols  # later rows: its last row
        return table[li * (cols + 1) + lj]

    out: Pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        up, left = value(i - 1, j), value(i, j - 1)
        best, came_from = up, 1
        if left > best:
            best, came_from = left, 2
        if row_block[i - 1] == col_block[j - 1]:
            x = weight(i - 1, j - 1)
            if x > 0.0 and value(i - 1, j - 1) + x > best:
                came_from = 3
        if came_from == 3:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif came_from == 1:
            i -= 1
        else:
            j -= 1
    out.reverse()
    return out


def _align_flat_sparse(rec: _Record) -> Pairs:
    """align_flat_sparse: the maximum-weight chain of overlapping flat pairs, prefix maxima over
    prediction indices in a Fenwick tree (O((n + m) log m))."""
    gs, ge, ps, pe, weight = rec.gs, rec.ge, rec.ps, rec.pe, rec.weight
    n, m = len(gs), len(ps)
    edges: list[tuple[int, int, float, int]] = []  # (i, j, best chain ending here, parent edge)
    tree_value, tree_edge = [0.0] * (m + 1), [-1] * (m + 1)

    def query(j: int) -> tuple[float, int]:  # best over predictions [0, j)
        best, at, k = 0.0, -1, j
        while k > 0:
            if tree_value[k] > best:
                best, at = tree_value[k], tree_edge[k]
            k &= k - 1
        return best, at

    def update(j: int, value: float, edge: int) -> None:  # prediction j (0-based)
        k = j + 1
        while k <= m:
            if value > tree_value[k]:
                tree_value[k], tree_edge[k] = value, edge
            k += k & -k

    first, best_total, best_edge = 0, 0.0, -1
    for i in range(n):
        while first < m and pe[first] <= gs[i]:
            first += 1
        row_begin = len(edges)
        j = first
        while j < m and ps[j] < ge[i]:  # the whole row's queries first: gold i only once
            w = weight(i, j)
            if w > 0.0:
                prev_value, prev_edge = query(j)
                edges.append((i, j, prev_value + w, prev_edge))
            j += 1
        for e in range(row_begin, len(edges)):
            update(edges[e][1], edges[e][2], e)
            if edges[e][2] > best_total:
                best_total, best_edge = edges[e][2], e
    out: Pairs = []
    e = best_edge
    while e >= 0:
        out.append((edges[e][0], edges[e][1]))
        e = edges[e][3]
    out.reverse()
    return out


def _assignment(weight: np.ndarray) -> Pairs:
    """align_assignment: exact maximum-weight matching of an n x m weight matrix by the Hungarian
    algorithm with potentials (the smaller side as rows), the C++ loop with its inner scan over
    the columns vectorised (the same operations on each element, the same first minimum)."""
    n, m = weight.shape
    if n == 0 or m == 0:
        return []
    transpose = n > m
    cost = -(weight.T if transpose else weight)  # minimisation; rows <= cols
    rows, cols = cost.shape
    inf = np.inf
    u, v = np.zeros(rows + 1), np.zeros(cols + 1)
    way = np.zeros(cols + 1, dtype=np.int64)
    assigned = np.zeros(cols + 1, dtype=np.int64)  # assigned[c] = row matched to column c (0: none)
    for r in range(1, rows + 1):
        assigned[0] = r
        c0 = 0
        minv = np.full(cols + 1, inf)
        used = np.zeros(cols + 1, dtype=bool)
        while True:
            used[c0] = True
            r0 = int(assigned[c0])
            free = ~used[1:]
            current = cost[r0 - 1] - u[r0] - v[1:]
            better = free & (current < minv[1:])
            minv[1:][better] = current[better]
            way[1:][better] = c0
            candidates = np.where(free, minv[1:], inf)
            c1 = int(np.argmin(candidates))  # the first minimum, as the C++ strict comparison
            delta = candidates[c1]
            c1 = c1 + 1 if delta < inf else 0
            u[assigned[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            c0 = c1
            if assigned[c0] == 0:
                break
        while True:
            c1 = int(way[c0])
            assigned[c0] = assigned[c1]
            c0 = c1
            if c0 == 0:
                break
    out: Pairs = []
    for c in range(1, cols + 1):
        if assigned[c] == 0:
            continue
        r = int(assigned[c])
        gi, pj = (c - 1, r - 1) if transpose else (r - 1, c - 1)
        if weight[gi, pj] > 0.0:
            out.append((gi, pj))
    out.sort()
    return out


def _align_clusters(rec: _Record) -> Pairs:
    """Clusters of chained overlapping spans, each aligned alone by the assignment solver."""
    order = sorted([(s, 2 * i) for i, s in enumerate(rec.gs)] + [(s, 2 * j + 1) for j, s in enumerate(rec.ps)])
    out: Pairs = []
    at = 0
    while at < len(order):
        cluster_gold: list[int] = []
        cluster_pred: list[int] = []
        max_end = None
        while True:
            code = order[at][1]
            idx, is_pred = code // 2, code % 2 == 1
            (cluster_pred if is_pred else cluster_gold).append(idx)
            end = rec.pe[idx] if is_pred else rec.ge[idx]
            max_end = end if max_end is None else max(max_end, end)
            at += 1
            if not (at < len(order) and order[at][0] < max_end):
                break
        cn, cm = len(cluster_gold), len(cluster_pred)
        if cn == 0 or cm == 0:
            continue
        if float(cn) * float(cm) > MAX_ASSIGNMENT_PAIRS:
            raise ValueError(
                f"a cluster of {cn} gold x {cm} predicted overlapping spans needs the assignment solver, which is "
                f"limited to {int(MAX_ASSIGNMENT_PAIRS)} span pairs per cluster (O(n m) memory, "
                "O(min(n,m)^2 max(n,m)) time); split the record, or remove overlapping spans so that the "
                "linear-time dynamic programme applies")
        weights = np.array([[rec.weight(g, p) for p in cluster_pred] for g in cluster_gold], dtype=np.float64)
        out.extend((cluster_gold[a], cluster_pred[b]) for a, b in _assignment(weights))
    out.sort()
    return out


def align_record(rec: _Record, method: str) -> tuple[Pairs, bool]:
    """Matched (gold index, pred index) pairs of one record sorted by gold index, and whether the
    dynamic programme ran (else the assignment solver)."""
    n, m = len(rec.gs), len(rec.ps)
    flat = _is_flat(rec.gs, rec.ge) and _is_flat(rec.ps, rec.pe)
    if method == "dp" and not flat:
        raise ValueError("the dynamic programme needs sorted, non-overlapping spans on both sides")
    use_dp = False if method == "assignment" else flat
    if n == 0 or m == 0:
        return [], use_dp
    if use_dp:
        pairs = _align_flat_blocks(rec)
        return (pairs if pairs is not None else _align_flat_sparse(rec)), True
    return _align_clusters(rec), False


# -- the batch (register_alignment.cpp's align_spans_batch, align_batch) -----------------------


def align_spans_batch(
    gold_offsets, gold_starts, gold_ends, pred_offsets, pred_starts, pred_ends,
    *,
    gold_labels=None,
    pred_labels=None,
    scheme="jaccard",
    method="auto",
    min_jaccard=0.0,
    min_overlap_percent=1.0,
    n_threads=0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The native ``align_spans_batch`` in Python: arguments, checks, messages and results as
    ``rapidscore.kernels.alignment.align_spans_batch`` documents them."""
    thread_count(n_threads, "n_threads", True)
    scheme, method = str_arg(scheme, "scheme"), str_arg(method, "method")
    min_jaccard = real_arg(min_jaccard, "min_jaccard")
    min_overlap_percent = real_arg(min_overlap_percent, "min_overlap_percent")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be 'jaccard', 'strict', 'exact', 'partial' or 'type', got '{scheme}'")
    if method not in METHODS:
        raise ValueError(f"method must be 'auto', 'dp' or 'assignment', got '{method}'")
    if not 0.0 <= min_jaccard <= 1.0:
        raise ValueError("min_jaccard must lie in [0, 1]")
    if not 0.0 <= min_overlap_percent <= 100.0:
        raise ValueError("min_overlap_percent must lie in [0, 100]")
    g_off, g_s, g_e = (_int_array_like(gold_offsets, "gold_offsets"), _int_array_like(gold_starts, "gold_starts"),
                       _int_array_like(gold_ends, "gold_ends"))
    p_off, p_s, p_e = (_int_array_like(pred_offsets, "pred_offsets"), _int_array_like(pred_starts, "pred_starts"),
                       _int_array_like(pred_ends, "pred_ends"))
    need_labels = scheme != "jaccard"
    if need_labels and (gold_labels is None or pred_labels is None):
        raise ValueError(f"scheme '{scheme}' needs gold_labels and pred_labels (integer label ids)")
    g_l = None if gold_labels is None else _int_array_like(gold_labels, "gold_labels")
    p_l = None if pred_labels is None else _int_array_like(pred_labels, "pred_labels")
    _validate_side("gold", g_off, g_s, g_e, g_l)
    _validate_side("pred", p_off, p_s, p_e, p_l)
    if len(g_off) != len(p_off):
        raise ValueError(f"gold_offsets and pred_offsets describe different numbers of records "
                         f"({len(g_off) - 1} vs {len(p_off) - 1})")
    n_records = len(g_off) - 1
    gs, ge, gl = g_s.tolist(), g_e.tolist(), g_l.tolist() if need_labels and g_l is not None else None
    ps, pe, pl = p_s.tolist(), p_e.tolist(), p_l.tolist() if need_labels and p_l is not None else None
    g_bounds, p_bounds = g_off.tolist(), p_off.tolist()

    pair_offsets = np.zeros(n_records + 1, dtype=np.int64)
    used_dp = np.zeros(n_records, dtype=bool)
    gold_index: list[int] = []
    pred_index: list[int] = []
    jaccard: list[float] = []
    for r in range(n_records):
        g0, g1, p0, p1 = g_bounds[r], g_bounds[r + 1], p_bounds[r], p_bounds[r + 1]
        rec = _Record((gs[g0:g1], ge[g0:g1], None if gl is None else gl[g0:g1]),
                      (ps[p0:p1], pe[p0:p1], None if pl is None else pl[p0:p1]),
                      scheme, min_jaccard, min_overlap_percent)
        try:
            pairs, used_dp[r] = align_record(rec, method)
        except ValueError as exc:
            raise ValueError(f"record {r}: {exc}") from None
        for i, j in pairs:
            gold_index.append(i)
            pred_index.append(j)
            jaccard.append(span_jaccard(rec.gs[i], rec.ge[i], rec.ps[j], rec.pe[j]))
        pair_offsets[r + 1] = pair_offsets[r] + len(pairs)
    return (pair_offsets, np.array(gold_index, dtype=np.int64), np.array(pred_index, dtype=np.int64),
            np.array(jaccard, dtype=np.float64), used_dp)

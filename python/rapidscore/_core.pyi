"""Type stub of the native module ``rapidscore._core`` (csrc/bindings/).

The module holds one submodule per area, named after the Python package that wraps it; call the
wrappers in :mod:`rapidscore.kernels` rather than these functions. The submodules are created
with pybind11's ``def_submodule``: they are attributes of ``_core``, not importable on their own
(``import rapidscore._core.matching`` fails), so this single-file stub describes each one as a
module-typed attribute whose class lists its functions.

Every kernel checks its inputs with the GIL held (TypeError / ValueError / IndexError naming the
argument) and then runs with the GIL released. ``n_threads`` / ``num_threads`` of 0 (or <= 0 for
the alignment) means all hardware threads.
"""

from types import ModuleType

import numpy as np
import numpy.typing as npt

__version__: str

class _BuildInfo(ModuleType):
    """Compiler, C++ standard and threading facts of this build."""

    version: str
    """The package version the module was built from (equals ``rapidscore.__version__``)."""
    compiler: str
    """The compiler's version string (``__VERSION__``)."""
    cplusplus: int
    """The C++ standard (``__cplusplus``, e.g. 201703)."""
    debug: bool
    """True for a debug (assertion-enabled, e.g. sanitizer) build."""
    max_threads: int
    """The largest thread count a kernel accepts (1024; ``rapidscore.threads.MAX_THREADS``)."""
    @staticmethod
    def hardware_threads() -> int:
        """Threads the kernels start for a thread count of 0 (at least 1)."""
    @staticmethod
    def matching_isa() -> str:
        """The instruction set the matching kernel runs on this CPU, chosen at run time:
        ``"x86-64-v4"`` (AVX-512), ``"x86-64-v3"`` (AVX2 + FMA) or ``"baseline"``."""
    @staticmethod
    def _throw_for_test(kind: str) -> None:
        """Test hook: throw the C++ exception ``kind`` (invalid_argument, out_of_range, length_error,
        bad_alloc, system_error, overflow_error, runtime_error) to check how it maps to Python."""

class _Matching(ModuleType):
    """BERTScore greedy cosine matching over a flat store of token embeddings."""

    @staticmethod
    def greedy_match(
        embeddings: npt.NDArray[np.floating],
        offsets: npt.NDArray[np.integer],
        weights: npt.NDArray[np.floating],
        pairs: npt.NDArray[np.integer],
        num_threads: int = 0,
        floors: npt.NDArray[np.bool_] | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """P, R, F (float64, shape (m,)) of the (candidate, reference) pairs (m, 2).

        embeddings (T, D) floating (converted to float32; NaN/inf refused, and rows whose L2 norm
        exceeds 9.22e18, whose dot products would overflow float32), offsets (n + 1,)
        non-decreasing within [0, T], weights (T,), pairs indices in [0, n). ``floors`` (m, 2) bool
        starts pair k's precision / recall token maxima at 0 (bert-score's padding). All arguments
        must be numpy arrays. See ``rapidscore.kernels.matching.greedy_match``.
        """
    @staticmethod
    def pairwise_match(
        embeddings: npt.NDArray[np.floating],
        offsets: npt.NDArray[np.integer],
        weights: npt.NDArray[np.floating],
        candidates: npt.NDArray[np.integer],
        references: npt.NDArray[np.integer],
        num_threads: int = 0,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """P, R, F (float64, shape (len(candidates), len(references))) of every candidate against
        every reference. See ``rapidscore.kernels.matching.pairwise_match``."""

class _Alignment(ModuleType):
    """One-to-one alignment of gold and predicted character spans."""

    @staticmethod
    def align_spans_batch(
        gold_offsets: npt.ArrayLike,
        gold_starts: npt.ArrayLike,
        gold_ends: npt.ArrayLike,
        pred_offsets: npt.ArrayLike,
        pred_starts: npt.ArrayLike,
        pred_ends: npt.ArrayLike,
        *,
        gold_labels: npt.ArrayLike | None = None,
        pred_labels: npt.ArrayLike | None = None,
        scheme: str = "jaccard",
        method: str = "auto",
        min_jaccard: float = 0.0,
        min_overlap_percent: float = 1.0,
        n_threads: int = 0,
    ) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
    ]:
        """Maximum-weight one-to-one alignment of the spans of many records (CSR layout).

        scheme: 'jaccard' (DMBertA: total character Jaccard), or 'strict', 'exact', 'partial',
        'type' (SemEval: correct pairs, then matched pairs, then Jaccard; need label ids).
        method: 'auto', 'dp' (sorted, non-overlapping spans) or 'assignment' (Hungarian).
        Returns (pair_offsets, gold_index, pred_index, jaccard, used_dp). See
        ``rapidscore.kernels.alignment.align_spans_batch``.
        """

class _Phrases(ModuleType):
    """Fuzzy refusal-phrase matching (SELECT keyword detector)."""

    class FuzzyPhraseMatcher:
        """Exact decision of ``max_k partial_ratio(text, phrase_k) / 100 > threshold`` for ASCII texts."""

        def __init__(self, processed_phrases: list[str], raw_lengths: list[int], threshold: float) -> None:
            """``processed_phrases``: rapidfuzz-processed phrases (1..64 characters of [a-z0-9 ]);
            ``raw_lengths``: each phrase's length before processing; ``threshold`` in [0, 1)."""
        @property
        def threshold(self) -> float: ...
        def __len__(self) -> int: ...
        def match(
            self, texts: list[str], n_threads: int = 0
        ) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int32], npt.NDArray[np.float64]]:
            """Per text: status (0 below the threshold, 1 above, 2 undecided: use the reference
            path), best phrase index, best partial_ratio."""

    @staticmethod
    def expand_contractions_ascii(text: str) -> str:
        """SELECT's contraction rules for ASCII text."""
    @staticmethod
    def default_process_ascii(text: str) -> str:
        """``rapidfuzz.utils.default_process`` for ASCII text."""

class _Resampling(ModuleType):
    """Paired bootstrap and approximate randomization sums of ``rapidscore.compare`` (the
    counter-based SplitMix64 stream of ``rapidscore.kernels.resampling_py``, the same sums bit for bit)."""

    @staticmethod
    def bootstrap_sums(
        rows: npt.NDArray[np.float64], key: int, first: int, count: int
    ) -> npt.NDArray[np.float64]:
        """(count, columns): the column sums of ``rows`` (C-contiguous float64 (n, columns), 1 <= n < 2**32,
        1, 2, 4 or a multiple of 8 columns) over bootstrap resamples ``first .. first + count - 1`` of the
        stream keyed ``key`` (ints in [0, 2**64)). See ``rapidscore.kernels.resampling.bootstrap_sums``."""
    @staticmethod
    def randomization_sums(
        gaps: npt.NDArray[np.float64], key: int, first: int, count: int
    ) -> npt.NDArray[np.float64]:
        """(count, columns): the column sums of ``gaps`` over the items each of trials ``first .. first +
        count - 1`` swaps. See ``rapidscore.kernels.resampling.randomization_sums``."""
    @staticmethod
    def isa() -> str:
        """The copy the resampling kernels run on this CPU: ``"x86-64-v4"`` or ``"baseline"`` (same sums)."""

build_info: _BuildInfo
matching: _Matching
alignment: _Alignment
phrases: _Phrases
resampling: _Resampling

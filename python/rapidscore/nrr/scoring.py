"""Semantic similarity and the Negative Rejection Rate (NRR).

A generated answer is *rejected* (its meaning is not captured) when its similarity to the ground
truth is strictly below a threshold. NRR = rejected / evaluated; the capture rate is 1 - NRR
(captured / (captured + not captured), the formula RAG write-ups often print).

This is not the "negative rejection" of RAG robustness benchmarks (the rate at which a model
correctly refuses when its retrieved documents hold no answer): that is
``rapidscore.abstention.rgb_negative_rejection`` (``rapidscore rgb``; refusal detectors in
``rapidscore.abstention``).
"""

from __future__ import annotations

import os
import warnings
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from rapidscore._version import __version__
from rapidscore.common.inputs import as_list, normalize_inputs
from rapidscore.common.result import import_pandas
from rapidscore.common.signature import Signature
from rapidscore.encoder.model_source import DEFAULT_MODEL
from rapidscore.errors import check_positive_int
from rapidscore.nrr.threshold import nrr_curve

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("embedding", "bertscore")
# Rows whose two sentence vectors are gathered at once for their cosines (2 x 16,384 x 384
# float64: 100 MB for MiniLM), however many rows share those vectors.
SIMILARITY_BLOCK = 16384

__all__ = ["NRRResult", "IndexedItems", "ItemIndex", "negative_rejection", "rejected_below", "similarity",
           "negative_rejection_frame", "negative_rejection_jsonl", "SentenceSimilarity"]


@dataclass(frozen=True)
class NRRResult:
    """Per-item similarities and rejections, and the rates over all items."""

    similarities: np.ndarray
    rejected: np.ndarray
    threshold: float
    signature: str
    best_reference: np.ndarray | None = field(repr=False, default=None)

    @property
    def n_evaluated(self) -> int:
        return int(self.rejected.size)

    @property
    def n_rejected(self) -> int:
        return int(self.rejected.sum())

    @property
    def n_captured(self) -> int:
        return self.n_evaluated - self.n_rejected

    @property
    def rate(self) -> float:
        """Negative Rejection Rate: fraction of items whose similarity is below the threshold."""
        return self.n_rejected / self.n_evaluated

    @property
    def capture_rate(self) -> float:
        """1 - NRR: fraction of items whose meaning is captured."""
        return self.n_captured / self.n_evaluated

    def curve(self, thresholds=None) -> tuple[np.ndarray, np.ndarray]:
        """NRR as a function of the threshold, from these similarities (see ``nrr_curve``)."""
        return nrr_curve(self.similarities, thresholds)

    def to_dict(self) -> dict:
        document = {"negative_rejection_rate": self.rate, "capture_rate": self.capture_rate,
                    "n_evaluated": self.n_evaluated, "n_rejected": self.n_rejected, "n_captured": self.n_captured,
                    "threshold": self.threshold, "signature": self.signature,
                    "similarities": self.similarities.tolist(), "rejected": self.rejected.tolist()}
        if self.best_reference is not None:
            document["best_reference"] = self.best_reference.tolist()
        return document

    def to_frame(self) -> pd.DataFrame:
        """One row per item: similarity, rejected, best_reference (the signature in ``attrs``)."""
        pandas = import_pandas()
        columns = {"similarity": self.similarities, "rejected": self.rejected}
        if self.best_reference is not None:
            columns["best_reference"] = self.best_reference
        frame = pandas.DataFrame(columns)
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        return (f"{self.signature} NRR: {self.rate:.4f} capture: {self.capture_rate:.4f} "
                f"rejected: {self.n_rejected}/{self.n_evaluated}")


def check_items(generated, references) -> tuple[list[str], list[list[str]]]:
    generated = as_list(generated, "generated", "a list of strings")
    references = as_list(references, "references", "a list of strings (or lists of strings)")
    if len(generated) == 0:
        raise ValueError("nothing to evaluate: generated is empty")
    if len(generated) != len(references):
        raise ValueError(f"Different number of generated answers and references: {len(generated)} != "
                         f"{len(references)}")
    return normalize_inputs(generated, references, names=("generated", "references"))


def check_threshold(threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or np.isnan(threshold):
        raise TypeError(f"threshold must be a number in [-1, 1], got {threshold!r}")
    if not -1.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must be in [-1, 1] (a cosine similarity), got {threshold}")
    return float(threshold)


def rejected_below(similarities, threshold: float) -> np.ndarray:
    """The Negative Rejection decision, in one place for every caller: an answer is rejected when
    its similarity is strictly below ``threshold``, compared in float32 (the similarities' type),
    so a similarity printed equal to the threshold is never rejected by a float64 rounding."""
    return np.asarray(similarities, dtype=np.float32) < np.float32(threshold)


class SentenceSimilarity:
    """Similarity of answer pairs: sentence-embedding cosine, or BERTScore F1.

    ``method="embedding"``: the cosine similarity of sentence embeddings made as the model's own
    sentence-transformers pipeline makes them (``Encoder.sentence_embeddings``: its pooling, Dense
    and Normalize modules, max_seq_length, do_lower_case and default prompt). ``prompt_name``: one
    of the model's prompts for both sides (sentence-transformers' ``encode(prompt_name=...)``).
    ``method="bertscore"``: BERTScore F1 at ``layer`` (default: the model's last layer).
    Reusable across calls. An empty (after strip) answer or reference gets similarity 0.
    Thread-safe: it holds a shared encoder (``rapidscore.get_encoder``) and no per-call state.

    The engine keywords, as for every metric (docs/encoder.md, "One vocabulary"): ``backend``
    (None: the precision's default), ``device``, ``precision``, ``num_threads`` (None: the thread
    budget), ``batch_tokens``, ``cache_dir``. ``max_length`` (embedding method): the token limit of
    a text (default: the model's ``max_seq_length``).
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, method: str = "embedding",
                 layer: int | None = None, progress: bool = False, *, prompt_name: str | None = None,
                 backend: str | None = None, device: str = "cpu", precision: str = "fp32",
                 num_threads: int | None = None, batch_tokens: int | None = None,
                 cache_dir: str | os.PathLike | None = None, max_length: int | None = None):
        from rapidscore.common.engine_options import encoder_keywords

        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if prompt_name is not None and method != "embedding":
            raise ValueError(f"prompt_name applies to method='embedding', got method={method!r}")
        if max_length is not None and method != "embedding":  # BERTScore takes the model's own
            raise TypeError(f"max_length applies to method='embedding', got method={method!r}")
        encoder_options = encoder_keywords(backend=backend, device=device, precision=precision,
                                           num_threads=num_threads, batch_tokens=batch_tokens, cache_dir=cache_dir)
        self.method, self.model_name, self.progress = method, os.fspath(model), progress
        self.prompt_name = prompt_name
        if method == "embedding":
            from rapidscore.encoder import get_encoder
            from rapidscore.encoder.model_source import resolve_model
            from rapidscore.encoder.sentence import load_pipeline

            # The pipeline first: a module rapidscore does not implement fails before any model loads.
            if max_length is None:
                max_length = load_pipeline(resolve_model(model)).max_seq_length
            else:  # 0 used to fall back to the pipeline's length silently
                max_length = check_positive_int(max_length, "max_length")
            self.encoder = get_encoder(model, layer=layer, max_length=max_length, **encoder_options)
            self.pipeline = self.encoder.sentence.pipeline
            self.prompt = self.pipeline.resolve_prompt(None, prompt_name)  # an unknown name fails here
            similarity = self.pipeline.similarity_fn_name
            if similarity not in (None, "cosine") and not (similarity == "dot" and self.pipeline.normalizes):
                warnings.warn(f"{self.model_name!r} declares similarity_fn_name={similarity!r}; NRR compares "
                              "cosine similarities (thresholds in [-1, 1]), which rank pairs differently",
                              UserWarning, stacklevel=2)
        else:
            from rapidscore.bertscore import BERTScore

            self.scorer = BERTScore(model=model, layer=layer, progress=progress, backend=backend, device=device,
                                    precision=precision, num_threads=num_threads, batch_tokens=batch_tokens,
                                    cache_dir=cache_dir)
            self.encoder = self.scorer.encoder

    @property
    def signature_fields(self) -> list[tuple[str, object]]:
        e = self.encoder
        if self.method == "embedding":
            # What decides the cosines: the pipeline up to a final Normalize (a cosine does not
            # change with it, so all-MiniLM-L6-v2's mean + Normalize stays "mean"), the prompt.
            pooling: list[tuple[str, object]] = [("pooling", self.pipeline.cosine_name)]
            if self.prompt:
                pooling.append(("prompt", self.prompt_name or self.pipeline.default_prompt_name))
            maxlen = e.sentence.max_length
        else:
            pooling, maxlen = [("pooling", "mean")], e.max_length
        return [("method", self.method), ("model", self.model_name), ("layer", e.layer), *pooling,
                ("maxlen", maxlen), ("backend", f"{e.backend}-{e.device}"), ("precision", e.precision),
                ("version", __version__)]

    @property
    def signature(self) -> str:
        return str(Signature(self.signature_fields))

    def sentence_vectors(self, texts: list[str], *, unpadded: bool | None = None) -> np.ndarray:
        """Unit sentence vectors (n, dim) float64 of validated, distinct ``texts`` as this object
        embeds them (its prompt; ``unpadded`` as in ``Encoder.embed_ids``): what ``pairs`` takes
        as ``embed`` for many requests at once."""
        vectors = self.encoder.sentence.embed_unique(texts, prompt_name=self.prompt_name, progress=self.progress,
                                                     unpadded=unpadded, stacklevel=3)
        return self._unit(vectors)

    def _unit(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1)) if vectors.ndim == 2 else np.zeros(0, np.int64)
        if bad.size:  # a NaN similarity is never below the threshold: the item would pass unseen
            raise ValueError(f"sentence vector {bad[0]} holds a non-finite value (NaN or inf); similarities "
                             "need finite embeddings")
        if self.pipeline.normalizes:
            return vectors  # unit already (a zero vector stays zero)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    def pairs(self, generated, groups, *,
              embed: Callable[[list[str]], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Best similarity of each generated answer over its references, and that reference's index.

        ``groups``: one reference string or list of references per answer, checked as
        :func:`negative_rejection` checks them (as many as ``generated``, none empty).
        ``embed``: sentence vectors of a list of texts, in place of the encoder's (a batching
        service passes the rows it computed for many requests at once)."""
        generated, groups = check_items(generated, groups)
        return self._pairs(generated, groups, embed)

    def _pairs(self, generated: list[str], groups: list[list[str]],
               embed: Callable[[list[str]], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pairs` of checked inputs."""
        index = ItemIndex()
        for text, group in zip(generated, groups):
            index.add(text, group)
        return self.indexed_pairs(index.items(), embed)

    def indexed_pairs(self, rows: IndexedItems,
                      embed: Callable[[list[str]], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pairs` of items held as indices into their distinct texts: each text is embedded
        once and the rows' cosines are gathered a block at a time (a million rows of a few texts
        cost a few arrays of a million numbers, never a sentence vector per row)."""
        texts, sizes = rows.texts, rows.sizes
        owners = np.repeat(np.arange(len(sizes)), sizes)
        gen_of, ref_of = rows.generated[owners], rows.references
        if self.method == "embedding":
            if embed is not None:
                vectors = self._unit(embed(texts))
            else:  # the texts are validated and distinct already: no second dedupe
                vectors = self.sentence_vectors(texts)
            sims = np.empty(len(owners), dtype=np.float64)
            for start in range(0, len(owners), SIMILARITY_BLOCK):
                block = slice(start, start + SIMILARITY_BLOCK)
                sims[block] = np.einsum("ij,ij->i", vectors[gen_of[block]], vectors[ref_of[block]])
        else:
            sims = self.scorer.score([texts[i] for i in gen_of], [texts[i] for i in ref_of]).f1.astype(np.float64)
        blank = np.fromiter((not t.strip() for t in texts), dtype=bool, count=len(texts))
        sims[blank[gen_of] | blank[ref_of]] = 0.0
        sims = np.clip(sims, -1.0, 1.0)
        if len(owners) == len(sizes):  # one reference each
            return sims.astype(np.float32), np.zeros(len(sizes), dtype=np.int64)
        best = np.full(len(sizes), -np.inf)
        np.fmax.at(best, owners, sims)  # fmax: a NaN similarity never wins, as in a comparison
        position = np.arange(len(owners)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        hits = np.flatnonzero(sims == best[owners])
        first_owners, first = np.unique(owners[hits], return_index=True)  # the first best reference
        best_index = np.zeros(len(sizes), dtype=np.int64)
        best_index[first_owners] = position[hits[first]]
        return best.astype(np.float32), best_index

    def score_iter(self, items, *, chunk_size: int = 4096, max_chars: int = 2_000_000) -> Iterator[tuple[float, int]]:
        """Stream ``(generated, reference)`` items (a reference may be a list of references) in
        chunks of at most ``chunk_size`` items and ``max_chars`` characters; yields
        ``(similarity, best_reference_index)`` per item in input order, equal to ``pairs`` over
        the same items. A bad item raises TypeError/ValueError naming its index; a bad
        ``chunk_size`` or ``max_chars`` raises at the call."""
        scored = self.score_chunks(items, chunk_size=chunk_size, max_chars=max_chars)  # checks the sizes now
        return (pair for _chunk, sims, best in scored for pair in zip(sims.tolist(), best.tolist()))

    def score_chunks(self, items, *, chunk_size: int = 4096,
                     max_chars: int = 2_000_000) -> Iterator[tuple[list, np.ndarray, np.ndarray]]:
        """:meth:`score_iter` by chunk: ``(chunk, similarities, best_reference)`` with the chunk's
        validated ``(generated, [references])`` items (the metric registry's stream uses it)."""
        from rapidscore.common.stream import chunks, iter_pairs

        chunk_size = check_positive_int(chunk_size, "chunk_size")
        max_chars = check_positive_int(max_chars, "max_chars")

        def cost(item: tuple[str, list[str]]) -> int:
            return len(item[0]) + sum(len(r) for r in item[1])

        def scored() -> Iterator[tuple[list, np.ndarray, np.ndarray]]:
            for chunk in chunks(iter_pairs(items, ("generated", "reference")), chunk_size, cost, max_chars):
                sims, best = self._pairs([g for g, _refs in chunk], [refs for _g, refs in chunk])
                yield chunk, sims, best
        return scored()

    def rejection(self, generated, groups, threshold: float, *,
                  embed: Callable[[list[str]], np.ndarray] | None = None) -> NRRResult:
        """``negative_rejection`` with this model: the inputs and ``threshold`` are checked as
        there (``embed`` as in :meth:`pairs`)."""
        threshold = check_threshold(threshold)
        generated, groups = check_items(generated, groups)
        index = ItemIndex()
        for text, group in zip(generated, groups):
            index.add(text, group)
        return self.indexed_rejection(index.items(), threshold, embed=embed)

    def indexed_rejection(self, rows: IndexedItems, threshold: float, *,
                          embed: Callable[[list[str]], np.ndarray] | None = None) -> NRRResult:
        """:meth:`rejection` of items held as indices into their distinct texts (a reader's
        :class:`ItemIndex`: its texts are strings, every item has a reference)."""
        threshold = check_threshold(threshold)
        if len(rows.sizes) == 0:
            raise ValueError("nothing to evaluate: generated is empty")
        sims, best = self.indexed_pairs(rows, embed)
        rejected = rejected_below(sims, threshold)
        signature = str(Signature([*self.signature_fields, ("threshold", threshold),
                                   ("nrefs", int(rows.sizes.max()))], name="nrr"))
        return NRRResult(similarities=sims, rejected=rejected, threshold=threshold, signature=signature,
                         best_reference=best)


class IndexedItems(NamedTuple):
    """Items ``(generated, [references])`` as indices into their distinct texts: ``texts`` (each
    once, in the order first seen), ``generated[i]`` the index of answer i's text,
    ``references`` those of every answer's references in order, ``sizes[i]`` how many answer i
    has: what a million rows of a few texts hold is a few texts and arrays of numbers. Made by
    :class:`ItemIndex`."""

    texts: list[str]
    generated: np.ndarray
    references: np.ndarray
    sizes: np.ndarray


class ItemIndex:
    """Builds :class:`IndexedItems` one item at a time (:meth:`add`, then :meth:`items`)."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._generated, self._references, self._sizes = array("q"), array("q"), array("q")

    def add(self, text: str, references: Sequence[str]) -> None:
        """One more item: an answer and its references (strings, at least one)."""
        index = self._index
        self._generated.append(index.setdefault(text, len(index)))
        self._references.extend(index.setdefault(ref, len(index)) for ref in references)
        self._sizes.append(len(references))

    def items(self) -> IndexedItems:
        def numbers(values: array) -> np.ndarray:
            return np.array(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)

        return IndexedItems(list(self._index), numbers(self._generated), numbers(self._references),
                            numbers(self._sizes))


def similarity(generated, references, model: str | os.PathLike = DEFAULT_MODEL, method: str = "embedding", *,
               layer: int | None = None, progress: bool = False, prompt_name: str | None = None,
               backend: str | None = None, device: str = "cpu", precision: str = "fp32",
               num_threads: int | None = None, batch_tokens: int | None = None,
               cache_dir: str | os.PathLike | None = None, max_length: int | None = None) -> np.ndarray:
    """Per-item similarity (float32) between generated answers and their reference(s). The other
    parameters are :class:`SentenceSimilarity`'s (the engine keywords as for every metric)."""
    generated, groups = check_items(generated, references)
    model_ = SentenceSimilarity(model, method, layer, progress, prompt_name=prompt_name, backend=backend,
                                device=device, precision=precision, num_threads=num_threads,
                                batch_tokens=batch_tokens, cache_dir=cache_dir, max_length=max_length)
    return model_._pairs(generated, groups)[0]


def negative_rejection(generated, references, threshold: float = 0.8, model: str | os.PathLike = DEFAULT_MODEL,
                       method: str = "embedding", *, similarity_model: SentenceSimilarity | None = None,
                       layer: int | None = None, progress: bool = False, prompt_name: str | None = None,
                       backend: str | None = None, device: str = "cpu", precision: str = "fp32",
                       num_threads: int | None = None, batch_tokens: int | None = None,
                       cache_dir: str | os.PathLike | None = None, max_length: int | None = None) -> NRRResult:
    """Negative Rejection Rate of generated answers against ground-truth answers.

    ``references``: one string per item, or a list of strings (the best similarity counts).
    An item is rejected when its similarity is strictly below ``threshold`` (in [-1, 1]; thresholds
    are model-specific: 0.8 suits all-MiniLM-L6-v2 cosines, not necessarily another model).
    Pass ``similarity_model`` to reuse a loaded model across calls. The other parameters are
    :class:`SentenceSimilarity`'s: ``layer``, ``progress``, ``prompt_name``, ``max_length`` and
    the engine keywords ``backend``, ``device``, ``precision``, ``num_threads`` (None: the thread
    budget), ``batch_tokens``, ``cache_dir``.
    """
    threshold = check_threshold(threshold)
    generated, groups = check_items(generated, references)
    if similarity_model is not None and not isinstance(similarity_model, SentenceSimilarity):
        raise TypeError("similarity_model must be a SentenceSimilarity (a loaded model to reuse) or None, "
                        f"got {type(similarity_model).__name__}: {similarity_model!r:.80}")
    sim_model = similarity_model or SentenceSimilarity(
        model, method, layer, progress, prompt_name=prompt_name, backend=backend, device=device, precision=precision,
        num_threads=num_threads, batch_tokens=batch_tokens, cache_dir=cache_dir, max_length=max_length)
    return sim_model.rejection(generated, groups, threshold)


def negative_rejection_frame(frame, generated: str = "generated", reference: str = "reference", **options) -> NRRResult:
    """NRR over a table's columns: a pandas DataFrame, a pyarrow Table or a ``datasets.Dataset``
    (a reference cell may hold a list of references). ColumnError names a missing column."""
    from rapidscore.common.tables import table_column

    return negative_rejection(table_column(frame, generated, "negative_rejection_frame"),
                              table_column(frame, reference, "negative_rejection_frame"), **options)


def negative_rejection_jsonl(path: str | os.PathLike, generated: str = "generated", reference: str = "reference",
                             **options) -> NRRResult:
    """NRR over a file with one record per item: JSONL, or CSV/TSV/Parquet columns (a JSONL or
    Parquet reference cell may hold a list of references)."""
    from rapidscore.common.io import read_column

    return negative_rejection(read_column(path, generated), read_column(path, reference), **options)

"""Label similarity S(gold label, predicted label) for DMBertA.

Labels are normalised (case, underscores, whitespace) and passed through an optional
user label map (synonyms) before comparison; identical normalised labels score exactly 1.
``"embedding"`` similarity is the cosine of the labels' sentence embeddings (negative cosines
count as 0); each distinct normalised label is embedded once per :class:`LabelSimilarity` object
and cached. ``"exact"`` similarity is 1 for identical normalised labels and 0 otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable

import numpy as np

from rapidscore.common.engine_options import deprecated_encoder_options, encoder_keywords

Embedder = Callable[[list], np.ndarray]

_SEPARATORS = re.compile(r"[\s_]+")


def normalize_label(label: str) -> str:
    """Lower-case, underscores as spaces, runs of whitespace collapsed: ``"Driver_License  "`` ->
    ``"driver license"``."""
    return _SEPARATORS.sub(" ", label).strip().lower()


def default_embedder(model: str | None = None, encoder_options: Mapping | None = None) -> Embedder:
    """Sentence-embedding function of the shared encoder: the model's sentence-transformers
    pipeline (``Encoder.sentence_embeddings``: its pooling, Dense layers and default prompt; mean
    pooling without a modules.json); the model is loaded on first use (or ``embed.load()``), once
    per process (``rapidscore.encoder.get_encoder``), and the embedder keeps the encoder it got:
    one ``get_encoder`` per embedder, not one per call. ``model``
    defaults to rapidscore's embedded all-MiniLM-L6-v2; ``encoder_options``: ``get_encoder``'s
    keyword arguments (backend, device, precision, num_threads, ...) and ``progress`` (a bar
    while embedding)."""

    options = dict(encoder_options or {})
    progress = bool(options.pop("progress", False))  # a per-call option, not part of the encoder
    got: list = []  # the encoder, once got (a benign race: get_encoder returns the same shared one)

    def load():
        if not got:
            from rapidscore.encoder import get_encoder

            got.append(get_encoder(model, **options))
        return got[0]

    def embed(labels: list) -> np.ndarray:
        return load().sentence_embeddings(list(labels), progress=progress)

    embed.load = load  # type: ignore[attr-defined]  # LabelSimilarity.load: the model now, not at first use
    return embed


class LabelSimilarity:
    """Similarity of label strings, shared across records and models of one evaluation run.

    ``method``: ``"embedding"`` (default) or ``"exact"``. ``embedder``: a callable mapping a list
    of label strings to an ``(n, dim)`` array (default: the shared encoder with ``model``).
    ``label_map``: ``{label: canonical label}`` applied to both sides after normalisation; labels
    mapped to the same canonical label score 1.

    The engine keywords select the default encoder (docs/encoder.md, "One vocabulary"):
    ``backend``, ``device``, ``precision``, ``num_threads`` (None: the thread budget),
    ``batch_tokens``, ``cache_dir``; ``unpadded=True`` runs it through the unpadded graph (what a
    serving process's batched scorers use); ``progress`` shows a bar while labels are embedded.
    ``encoder_options``: the deprecated dict form of the engine keywords (DeprecationWarning).
    """

    def __init__(
        self,
        method: str = "embedding",
        *,
        model: str | None = None,
        embedder: Embedder | None = None,
        label_map: Mapping[str, str] | None = None,
        backend: str | None = None,
        device: str = "cpu",
        precision: str = "fp32",
        num_threads: int | None = None,
        batch_tokens: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        unpadded: bool = False,
        progress: bool = False,
        encoder_options: Mapping | None = None,
    ):
        from rapidscore.threads import check_num_threads

        check_num_threads(num_threads)  # a clear error now, not at the first label embedded
        keywords = encoder_keywords(backend=backend, device=device, precision=precision, num_threads=num_threads,
                                    batch_tokens=batch_tokens, cache_dir=cache_dir, unpadded=unpadded)
        if encoder_options is None:
            options = dict(keywords, progress=True) if progress else keywords
        else:
            keywords = dict(keywords, progress=True) if progress else keywords
            options = deprecated_encoder_options(encoder_options, keywords, where="LabelSimilarity")
        if method not in ("embedding", "exact"):
            raise ValueError(f"label similarity must be 'embedding' or 'exact', got {method!r}")
        if label_map is not None and not isinstance(label_map, Mapping):
            raise TypeError(f"label_map must be a mapping of label -> canonical label, got {type(label_map).__name__}")
        self.method = method
        self._embedder: Embedder | None = embedder if embedder is not None else (
            default_embedder(model, options) if method == "embedding" else None)
        # what the signature names: the encoder's model, "custom" for a user embedder, none for exact
        if method == "exact":
            self.model_name = None
        elif embedder is not None:
            self.model_name = "custom"
        else:
            from rapidscore.encoder.model_source import DEFAULT_MODEL

            self.model_name = model or DEFAULT_MODEL
        self._map = {}
        for key, value in (label_map or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"label_map entries must be strings, got {key!r}: {value!r}")
            self._map[normalize_label(key)] = normalize_label(value)
        self.has_label_map = bool(self._map)
        self._vectors: dict = {}
        self.embedded_labels = 0  # how many distinct labels went through the embedder
        self.embedder_calls = 0

    def load(self) -> None:
        """Load the default embedder's model now rather than at the first label (a streamed command
        records the models it runs in its resume state before the first row)."""
        load = getattr(self._embedder, "load", None)
        if load is not None:
            load()

    def canonical(self, label: str) -> str:
        """Normalised label after the label map."""
        norm = normalize_label(label)
        return self._map.get(norm, norm)

    def _ensure_embedded(self, labels: Iterable[str]) -> None:
        missing = sorted({label for label in labels if label not in self._vectors})
        if not missing:
            return
        assert self._embedder is not None  # only the "embedding" method embeds labels
        vectors = np.asarray(self._embedder(missing), dtype=np.float64)
        self.embedder_calls += 1
        if vectors.ndim != 2 or vectors.shape[0] != len(missing):
            raise ValueError(
                f"label embedder returned shape {vectors.shape} for {len(missing)} labels; expected (n_labels, dim)"
            )
        bad_rows = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if bad_rows.size:
            raise ValueError(f"label embedder returned a non-finite vector (NaN or inf) for label "
                             f"{missing[bad_rows[0]]!r}; label embeddings must be finite")
        # scaled by each row's largest magnitude first, so that the norm of huge finite values
        # (1e200) does not overflow to inf
        scale = np.abs(vectors).max(axis=1, keepdims=True) if vectors.shape[1] else np.zeros((len(missing), 1))
        vectors = np.divide(vectors, scale, out=np.zeros_like(vectors), where=scale > 0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        for label, vector in zip(missing, vectors):
            self._vectors[label] = vector
        self.embedded_labels += len(missing)

    def matrix(self, gold_labels: Sequence[str], pred_labels: Sequence[str]) -> np.ndarray:
        """``(len(gold_labels), len(pred_labels))`` similarities in [0, 1] of canonical labels."""
        gold = [self.canonical(x) for x in gold_labels]
        pred = [self.canonical(x) for x in pred_labels]
        same = np.array([[g == p for p in pred] for g in gold], dtype=bool).reshape(len(gold), len(pred))
        if self.method == "exact" or not gold or not pred:
            return same.astype(np.float64)
        self._ensure_embedded(gold + pred)
        g = np.stack([self._vectors[x] for x in gold])
        p = np.stack([self._vectors[x] for x in pred])
        sim = np.clip(g @ p.T, 0.0, 1.0)
        sim[same] = 1.0
        return sim

    def __call__(self, gold_label: str, pred_label: str) -> float:
        return float(self.matrix([gold_label], [pred_label])[0, 0])


def make_label_similarity(
    label_similarity: str | LabelSimilarity = "embedding",
    *,
    label_model: str | None = None,
    embedder: Embedder | None = None,
    label_map: Mapping[str, str] | None = None,
    **engine: Any,
) -> LabelSimilarity:
    """``label_similarity`` itself when it is a :class:`LabelSimilarity`, else one built with
    these options (``engine``: :class:`LabelSimilarity`'s engine keywords)."""
    if isinstance(label_similarity, LabelSimilarity):
        return label_similarity
    return LabelSimilarity(label_similarity, model=label_model, embedder=embedder, label_map=label_map,
                           **engine)

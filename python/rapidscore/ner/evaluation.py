"""DMBertA and SemEval-2013 (strict / exact / partial / type) scores of NER predictions."""

from __future__ import annotations

import inspect
import os
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.common.inputs import as_list
from rapidscore.common.signature import Signature, version_fields
from rapidscore.ner.alignment import PackedSpans, align_batch
from rapidscore.ner.formats import Entity, to_entities
from rapidscore.ner.labels import Embedder, LabelSimilarity, make_label_similarity
from rapidscore.ner.normalize import Repairs, normalize_entities
from rapidscore.ner.records import Record, is_label_list, join_by_id, to_records
from rapidscore.ner.results import Comparison, NerResult
from rapidscore.ner.semeval import (
    SEMEVAL_MATCHING,
    SEMEVAL_SCHEMES,
    SemevalOptionError,
    match_scheme,
    precision_recall_f1,
    semeval_by_type,
)
from rapidscore.ner.semeval import semeval_summary as semeval_summary  # re-exported: rapidscore.ner's name
from rapidscore.threads import num_threads_or_alias

if TYPE_CHECKING:
    pass


@dataclass
class PreparedSide:
    """One side (gold or one model) after format conversion and normalisation."""

    entities: list  # per record: list[Entity], sorted, de-duplicated
    repairs: Repairs
    record_repairs: list  # per record: Repairs


def prepare(
    records: Sequence[Record],
    *,
    texts: Sequence[str | None],
    format: str = "auto",
    trim: bool = True,
    on_missing_surface: str = "error",
) -> PreparedSide:
    """Convert and normalise one side of every record (``texts`` come from the gold side)."""
    total = Repairs()
    entities, per_record = [], []
    for rec, text in zip(records, texts):
        if text is not None and is_label_list(rec.entities):
            # token offsets against character offsets would score silently wrong
            from rapidscore.ner.tags import TagError

            raise TagError(f"record {rec.id!r}: bare token labels scored against a text (the gold side's, or "
                           "tokens joined): their offsets are token positions, not characters; give this "
                           "side's 'tokens' with its labels, or leave tokens and texts off both sides")
        raw = to_entities(rec.entities, format, record=rec.id)
        ents, repairs = normalize_entities(raw, text, record=rec.id, trim=trim, on_missing_surface=on_missing_surface)
        entities.append(ents)
        per_record.append(repairs)
        total.add(repairs)
    return PreparedSide(entities, total, per_record)


def ner_signature(similarity: LabelSimilarity, *, min_jaccard: float = 0.0, min_overlap_percent: float = 1.0,
                  semeval_matching: str = "optimal", trim: bool = True) -> str:
    """``ner|labels:embedding|label_model:...|label_map:no|min_jaccard:0|...|version:...``."""
    fields = [("labels", similarity.method), ("label_model", similarity.model_name),
              ("label_map", similarity.has_label_map), ("min_jaccard", float(min_jaccard)),
              ("schemes", "+".join(SEMEVAL_SCHEMES)), ("min_overlap", float(min_overlap_percent)),
              ("matching", semeval_matching), ("trim", trim), *version_fields()]
    return str(Signature(fields, name="ner"))


def _entity_json(e: Entity) -> list:
    return [e.start, e.end, e.label, e.surface]


def _semeval_entities(lists: dict[str, list], gold: list[tuple], pred: list[tuple]) -> dict:
    """One record's entities of one scheme by category (``SchemeMatches.record_lists``):
    ``(gold, pred)`` pairs for correct/incorrect/partial, the gold entity for missed, the
    prediction for spurious; each entity the record's one ``(start, end, label, surface)`` tuple
    (immutable, so shared by every scheme: no copies, and few objects for the garbage collector)."""
    out: dict[str, list] = {category: [(gold[i], pred[j]) for i, j in lists[category]]
                            for category in ("correct", "incorrect", "partial")}
    out["missed"] = [gold[i] for i in lists["missed"]]
    out["spurious"] = [pred[j] for j in lists["spurious"]]
    return out


def score_model(
    name: str,
    ids: Sequence,
    gold: PreparedSide,
    pred: PreparedSide,
    similarity: LabelSimilarity,
    *,
    min_jaccard: float = 0.0,
    min_overlap_percent: float = 1.0,
    semeval_matching: str = "optimal",
    num_threads: int | None = None,
    trim: bool = True,
    n_threads: int | None = None,
) -> NerResult:
    """DMBertA and SemEval scores of one prepared model side against the prepared gold side
    (``trim``: whether the sides were trimmed, for the signature; ``num_threads``: the alignment's
    threads, None = the thread budget; ``n_threads``: its deprecated alias)."""
    num_threads = num_threads_or_alias(num_threads, n_threads, where="score_model")
    if semeval_matching not in SEMEVAL_MATCHING:
        raise SemevalOptionError(f"semeval_matching must be one of {SEMEVAL_MATCHING}, got {semeval_matching!r}")
    canonical = {}
    for side in (gold.entities, pred.entities):
        for ents in side:
            for e in ents:
                if e.label not in canonical:
                    canonical[e.label] = similarity.canonical(e.label)
    vocab = sorted(set(canonical.values()))
    label_id = {label: i for i, label in enumerate(vocab)}
    raw_id = {raw: label_id[c] for raw, c in canonical.items()}
    g = PackedSpans.from_records(gold.entities, raw_id, lambda e: e.label)
    p = PackedSpans.from_records(pred.entities, raw_id, lambda e: e.label)
    assert g.labels is not None and p.labels is not None  # packed with label ids
    n = g.n_records
    n_gold, n_pred = np.diff(g.offsets), np.diff(p.offsets)

    # DMBertA: Jaccard-optimal alignment, credit = J x S(labels).
    sim = similarity.matrix(vocab, vocab) if vocab else np.zeros((0, 0))
    al = align_batch(g, p, scheme="jaccard", min_jaccard=min_jaccard, num_threads=num_threads)
    pair_rec = al.pair_records()
    gi = g.offsets[pair_rec] + al.gold_index
    pj = p.offsets[pair_rec] + al.pred_index
    label_sim = sim[g.labels[gi], p.labels[pj]] if len(gi) else np.zeros(0)
    credit = al.jaccard * label_sim
    rec_credit = np.bincount(pair_rec, weights=credit, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(n_pred > 0, rec_credit / np.maximum(n_pred, 1), 0.0)
        recall = np.where(n_gold > 0, rec_credit / np.maximum(n_gold, 1), 0.0)
        score = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    both_empty = (n_gold == 0) & (n_pred == 0)
    precision[both_empty] = recall[both_empty] = score[both_empty] = 1.0
    total_credit, total_gold, total_pred = float(credit.sum()), int(n_gold.sum()), int(n_pred.sum())
    micro_p, micro_r, micro_f = precision_recall_f1(total_credit, total_pred, total_gold)
    if total_gold == 0 and total_pred == 0:
        micro_p = micro_r = micro_f = 1.0
    dmberta = {
        "mean": float(score.mean()) if n else 0.0,
        "accumulate": float(score.sum()),
        "precision_mean": float(precision.mean()) if n else 0.0,
        "recall_mean": float(recall.mean()) if n else 0.0,
        "precision": micro_p, "recall": micro_r, "f1": micro_f,
        "credit": total_credit, "n_gold": total_gold, "n_pred": total_pred,
    }

    # Per-label breakdown (canonical labels).
    gold_label_count = np.bincount(g.labels, minlength=len(vocab)) if len(vocab) else np.zeros(0, int)
    pred_label_count = np.bincount(p.labels, minlength=len(vocab)) if len(vocab) else np.zeros(0, int)
    gold_label_credit = np.bincount(g.labels[gi], weights=credit, minlength=len(vocab)) if len(vocab) else np.zeros(0)
    pred_label_credit = np.bincount(p.labels[pj], weights=credit, minlength=len(vocab)) if len(vocab) else np.zeros(0)
    matched_to: defaultdict[int, Counter[str]] = defaultdict(Counter)
    for a, b in zip(g.labels[gi].tolist(), p.labels[pj].tolist()):
        matched_to[a][vocab[b]] += 1
    per_label = {
        "gold": {
            vocab[k]: {"n": int(gold_label_count[k]), "credit": float(gold_label_credit[k]),
                       "recall": float(gold_label_credit[k] / gold_label_count[k]),
                       "matched_pred_labels": dict(matched_to[k].most_common())}
            for k in range(len(vocab)) if gold_label_count[k] > 0
        },
        "pred": {
            vocab[k]: {"n": int(pred_label_count[k]), "credit": float(pred_label_credit[k]),
                       "precision": float(pred_label_credit[k] / pred_label_count[k])}
            for k in range(len(vocab)) if pred_label_count[k] > 0
        },
    }

    # SemEval schemes: overall, per entity type (canonical label), per record.
    scheme_matches = {scheme: match_scheme(g, p, scheme, matching=semeval_matching,
                                           min_overlap_percent=min_overlap_percent, num_threads=num_threads)
                      for scheme in SEMEVAL_SCHEMES}
    semeval = {scheme: matches.summary() for scheme, matches in scheme_matches.items()}
    rec_semeval = {scheme: matches.counts() for scheme, matches in scheme_matches.items()}
    by_type = semeval_by_type(g, p, vocab, matching=semeval_matching, min_overlap_percent=min_overlap_percent,
                              num_threads=num_threads)

    def detail() -> list:
        out = []
        starts = al.pair_offsets
        scheme_lists = [matches.iter_record_lists() for matches in scheme_matches.values()]
        for r, lists in enumerate(zip(*scheme_lists)):
            # each entity as a tuple once, shared by the four schemes' lists
            gold_rows = [(e.start, e.end, e.label, e.surface) for e in gold.entities[r]]
            pred_rows = [(e.start, e.end, e.label, e.surface) for e in pred.entities[r]]
            matches = []
            for k in range(starts[r], starts[r + 1]):
                ge = gold.entities[r][al.gold_index[k]]
                pe = pred.entities[r][al.pred_index[k]]
                matches.append({
                    "gold": _entity_json(ge), "pred": _entity_json(pe), "jaccard": float(al.jaccard[k]),
                    "label_similarity": float(label_sim[k]), "credit": float(credit[k]),
                })
            out.append({
                "id": ids[r], "n_gold": int(n_gold[r]), "n_pred": int(n_pred[r]),
                "precision": float(precision[r]), "recall": float(recall[r]), "score": float(score[r]),
                "matches": matches,
                "semeval": {s: dict(zip(("correct", "incorrect", "partial", "missed", "spurious"),
                                        rec_semeval[s][r].tolist())) for s in SEMEVAL_SCHEMES},
                "semeval_entities": {s: _semeval_entities(scheme_lists_r, gold_rows, pred_rows)
                                     for s, scheme_lists_r in zip(scheme_matches, lists)},
                "repairs": {"gold": gold.record_repairs[r].to_dict(), "pred": pred.record_repairs[r].to_dict()},
            })
        return out

    settings = {
        "label_similarity": similarity.method, "min_jaccard": min_jaccard,
        "min_overlap_percent": min_overlap_percent, "semeval_matching": semeval_matching,
    }
    signature = ner_signature(similarity, min_jaccard=min_jaccard, min_overlap_percent=min_overlap_percent,
                              semeval_matching=semeval_matching, trim=trim)
    return NerResult(name, n, dmberta, semeval, per_label,
                     {"gold": gold.repairs.to_dict(), "pred": pred.repairs.to_dict()}, settings, signature,
                     semeval_by_type=by_type, _detail=detail)


def _records_of(data: Any, texts, ids, source: str) -> list:
    if type(data).__module__.partition(".")[0] in ("numpy", "pandas", "pyarrow"):
        # a 1-D array or Series of records, as text inputs accept (its truth value was ambiguous)
        data = as_list(data, source, "a list of records or of per-record entities")
    if data and isinstance(data, Sequence) and not isinstance(data, (str, bytes)) and isinstance(data[0], Record):
        return list(data)
    return to_records(data, texts=texts, ids=ids, source=source)


# The label encoder's keywords of compare/evaluate (LabelSimilarity's engine keywords).
_LABEL_ENGINE_KEYWORDS = ("backend", "device", "precision", "num_threads", "batch_tokens", "cache_dir", "unpadded",
                          "progress")


def _label_engine(where: str, num_threads: Any, n_threads: Any, encoder_options: Any,
                  engine: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """(the alignment's threads, the label encoder's keywords) of ``where``'s arguments: the
    deprecated ``n_threads`` and ``encoder_options`` resolved with a DeprecationWarning at the
    caller of ``where``, everything checked before any work."""
    num_threads = num_threads_or_alias(num_threads, n_threads, where=where, stacklevel=5)
    if encoder_options is None:
        return num_threads, dict(engine, num_threads=num_threads)
    # the old dict: the label encoder's options only (num_threads above stays the alignment's)
    warnings.warn(f"{where}(encoder_options=...) is deprecated: pass the label encoder's options as keywords "
                  f"({', '.join(_LABEL_ENGINE_KEYWORDS)})", DeprecationWarning, stacklevel=4)
    if not isinstance(encoder_options, Mapping):
        raise TypeError(f"{where}(): encoder_options must be a mapping, got {type(encoder_options).__name__}")
    defaults = {"backend": None, "device": "cpu", "precision": "fp32", "batch_tokens": None, "cache_dir": None,
                "unpadded": False, "progress": False}
    given = sorted(name for name, value in engine.items() if defaults[name] != value)
    if given:
        raise TypeError(f"{where}() got encoder_options and the keyword(s) {', '.join(given)}: give the keywords only")
    unknown = sorted(set(encoder_options) - set(_LABEL_ENGINE_KEYWORDS))
    if unknown:
        raise TypeError(f"{where}(): encoder_options has no option(s) {unknown} (the label encoder's: "
                        f"{', '.join(_LABEL_ENGINE_KEYWORDS)})")
    return num_threads, dict(encoder_options)


def compare(gold: Any, predictions: Mapping[str, Any], **options: Any) -> Comparison:
    """Score several models against one gold standard; returns ``{model: NerResult}`` with
    ``.table()`` and ``.ranking()``.

    ``gold`` and each ``predictions[model]`` are either lists of record dicts
    (``{"id", "text", "labels"}``; joined by id) or lists of per-record entities in any supported
    format (joined by position, ``texts``/``ids`` given separately). Texts come from the gold side.
    Each distinct label is embedded once for the whole comparison. ``options``: the keyword
    parameters of :func:`evaluate` (one list, typed and documented there), except ``name`` (each
    model is named by its key); another keyword is a TypeError naming it.
    """
    if "name" in options:
        raise TypeError("compare() names each model by its key in predictions: name= is evaluate()'s")
    try:
        arguments = _EVALUATE.bind(gold, {}, **options)
    except TypeError as exc:
        raise TypeError(f"compare(): {exc}") from None
    arguments.apply_defaults()
    return _scored("compare", gold, predictions, arguments.arguments)


def _scored(where: str, gold: Any, predictions: Mapping[str, Any], arguments: Mapping[str, Any]) -> Comparison:
    """:func:`evaluate` / :func:`compare` of their keyword ``arguments`` (evaluate's names)."""
    a = arguments
    num_threads, label_engine = _label_engine(where, a["num_threads"], a["n_threads"], a["encoder_options"], dict(
        backend=a["backend"], device=a["device"], precision=a["precision"], batch_tokens=a["batch_tokens"],
        cache_dir=a["cache_dir"], unpadded=a["unpadded"], progress=a["progress"]))
    return _compare(gold, predictions, texts=a["texts"], ids=a["ids"], format=a["format"],
                    gold_format=a["gold_format"], label_similarity=a["label_similarity"],
                    label_model=a["label_model"], embedder=a["embedder"], label_map=a["label_map"],
                    min_jaccard=a["min_jaccard"], min_overlap_percent=a["min_overlap_percent"],
                    semeval_matching=a["semeval_matching"], trim=a["trim"],
                    on_missing_surface=a["on_missing_surface"], num_threads=num_threads, label_engine=label_engine)


def _compare(gold: Any, predictions: Mapping[str, Any], *, texts: Sequence[str | None] | None, ids: Sequence | None,
             format: str, gold_format: str | None, label_similarity: str | LabelSimilarity, label_model: str | None,
             embedder: Embedder | None, label_map: Mapping[str, str] | None, min_jaccard: float,
             min_overlap_percent: float, semeval_matching: str, trim: bool, on_missing_surface: str,
             num_threads: int | None, label_engine: dict[str, Any]) -> Comparison:
    """:func:`compare` of resolved arguments (``label_engine``: the label encoder's keywords)."""
    if not isinstance(predictions, Mapping) or not predictions:
        raise TypeError("predictions must be a non-empty mapping of model name -> predictions")
    if not isinstance(trim, bool):  # trim='no' is truthy: refuse it rather than trim
        raise TypeError(f"trim must be True or False, got {type(trim).__name__}: {trim!r}")
    similarity = make_label_similarity(label_similarity, label_model=label_model, embedder=embedder,
                                       label_map=label_map, **label_engine)
    if texts is not None:  # numpy arrays, pandas Series and pyarrow arrays too (None = no text)
        texts = as_list(texts, "texts", "a list of strings")
    if ids is not None:
        ids = as_list(ids, "ids", "a list of ids")
    gold_records = _records_of(gold, texts, ids, "gold")
    if not gold_records:  # precision/recall of nothing are undefined, not 1.0
        raise ValueError("gold holds no records: nothing to evaluate")
    record_texts = [rec.text for rec in gold_records]
    gold_side = prepare(gold_records, texts=record_texts, format=gold_format or format, trim=trim,
                        on_missing_surface=on_missing_surface)
    out = Comparison()
    for name, data in predictions.items():
        pred_records = _records_of(data, texts, ids, f"predictions[{name!r}]")
        if len(pred_records) != len(gold_records) or any(a.id != b.id for a, b in zip(pred_records, gold_records)):
            pred_records = join_by_id(gold_records, pred_records, name)
        else:
            join_by_id(gold_records, pred_records, name)  # text consistency check
        pred_side = prepare(pred_records, texts=record_texts, format=format, trim=trim,
                            on_missing_surface=on_missing_surface)
        out[name] = score_model(name, [rec.id for rec in gold_records], gold_side, pred_side, similarity,
                                min_jaccard=min_jaccard, min_overlap_percent=min_overlap_percent,
                                semeval_matching=semeval_matching, num_threads=num_threads, trim=trim)
    return out


def evaluate(
    gold: Any,
    predictions: Any,
    *,
    name: str = "model",
    texts: Sequence[str | None] | None = None,
    ids: Sequence | None = None,
    format: str = "auto",
    gold_format: str | None = None,
    label_similarity: str | LabelSimilarity = "embedding",
    label_model: str | None = None,
    embedder: Embedder | None = None,
    label_map: Mapping[str, str] | None = None,
    min_jaccard: float = 0.0,
    min_overlap_percent: float = 1.0,
    semeval_matching: str = "optimal",
    trim: bool = True,
    on_missing_surface: str = "error",
    num_threads: int | None = None,
    backend: str | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    batch_tokens: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    unpadded: bool = False,
    progress: bool = False,
    n_threads: int | None = None,
    encoder_options: Mapping | None = None,
) -> NerResult:
    """DMBertA and SemEval scores of one model's ``predictions`` against ``gold``.

    Parameters (all but ``gold`` and ``predictions`` keyword-only):

    - ``gold``, ``predictions``: lists of record dicts (``{"id", "text", "labels"}``; joined by
      id) or lists of per-record entities in any supported format (joined by position).
    - ``name``: the model's name in the result (default ``"model"``).
    - ``texts``, ``ids``: each record's text and id, for entity lists given without them.
    - ``format``: entity format of the predictions, and of the gold unless ``gold_format`` is
      given (default ``"auto"``); ``gold_format``: the gold's.
    - ``label_similarity``: ``"embedding"`` (default), ``"exact"``, or a :class:`LabelSimilarity`.
    - ``label_model``: encoder for label embeddings (default rapidscore's embedded all-MiniLM-L6-v2).
    - ``embedder``: callable ``list[str] -> (n, dim) array`` replacing the encoder.
    - ``label_map``: ``{label: canonical}`` synonyms, scored 1 when canonical labels agree.
    - ``min_jaccard``: minimum character Jaccard for a DMBertA pair (default 0 = any overlap).
    - ``min_overlap_percent``: SemEval overlap threshold on the gold span (default 1, as nervaluate).
    - ``semeval_matching``: ``"optimal"`` (default) or ``"nervaluate"`` for its greedy first match.
    - ``trim``: strip whitespace/punctuation at span edges (default True).
    - ``on_missing_surface``: ``"error"`` (default), or ``"drop"`` and report.
    - ``num_threads``: threads of the span alignment and the label encoder (None, default: the
      thread budget, ``rapidscore.threads``; else an int in [1, 1024]).
    - ``backend``, ``device``, ``precision``, ``batch_tokens``, ``cache_dir``: the label encoder's
      engine options, as everywhere (docs/encoder.md, "One vocabulary").
    - ``unpadded``: run the label encoder through the unpadded graph (default False; what a
      serving process's batched scorers use, so that it needs one graph only).
    - ``progress``: a progress bar while labels are embedded (default False).
    - ``n_threads``: deprecated alias of ``num_threads`` (DeprecationWarning; its 0 = None).
    - ``encoder_options``: deprecated dict form of the label encoder's options
      (DeprecationWarning); ``num_threads`` then applies to the alignment only.
    """
    return _scored("evaluate", gold, {name: predictions}, locals())[name]


_EVALUATE = inspect.signature(evaluate)

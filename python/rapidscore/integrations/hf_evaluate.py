"""Hugging Face ``evaluate``: rapidscore's BERTScore and semantic similarity (NRR) as evaluation
modules (the ``[integrations]`` extra: ``pip install evaluate``).

    import evaluate
    from rapidscore.integrations.hf_evaluate import module_path

    bertscore = evaluate.load(module_path("bertscore"))
    bertscore.compute(predictions=["a cat sat"], references=[["a cat sat down"]], model_type="all-MiniLM-L6-v2")

The BERTScore module takes the hub ``bertscore`` metric's inputs and keywords (``predictions``;
``references``: a string or a list of strings per prediction; ``lang``, ``model_type``,
``num_layers``, ``idf``, ``batch_size``, ``nthreads``, ``all_layers``, ``rescale_with_baseline``,
``baseline_path``, ``use_fast_tokenizer``, ``device``, ``verbose``) and returns its keys
(``precision``, ``recall``, ``f1`` lists and ``hashcode``: here rapidscore's signature, which
names the model, layer, idf, rescaling and rapidscore's version). ``idf`` may also be an idf
file path or a ``DocumentFrequencies`` (rapidscore's: weights from those document counts, as
``BERTScore(idf=...)``; hashcode ``idf:file=<sha8>``). Without ``lang`` and
``model_type`` it uses rapidscore's default model (all-MiniLM-L6-v2, embedded). rapidscore's
engine keywords (``backend``, ``precision``, ``num_threads``, ``batch_tokens``, ``cache_dir``)
pass through. The numbers are ``rapidscore.bertscore.BERTScore``'s with
``reference_batch_size=batch_size`` (bert-score's padding, as the hub metric computes it).

The NRR module (``module_path("nrr")``) returns ``similarity`` and ``best_reference`` per
prediction and, with ``threshold``, ``rejected`` and the ``negative_rejection_rate``: the numbers
of ``rapidscore.nrr.SentenceSimilarity`` and ``negative_rejection``.

Both modules check their inputs in ``add``, ``add_batch`` and ``compute`` and raise
:class:`IntegrationInputError` / :class:`IntegrationTypeError` naming the argument (evaluate's own
message names neither the row nor the argument).

Thread safety: an evaluation module holds the rows added to it (evaluate's design): use one per
thread. The scorers behind it are shared (``rapidscore.get_encoder``) and thread-safe, and a
module's own scorer cache takes a lock.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from rapidscore.common.inputs import normalize_inputs
from rapidscore.errors import IntegrationInputError, IntegrationTypeError, check_positive_int

try:
    import datasets  # type: ignore[import-untyped, unused-ignore]
    import evaluate  # type: ignore[import-untyped, unused-ignore]
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("rapidscore.integrations.hf_evaluate needs Hugging Face evaluate: "
                      "pip install 'rapidscore[integrations]' (or evaluate)") from exc

__all__ = ["BERTScoreModule", "NRRModule", "module_path", "MODULES"]

_SCRIPTS = Path(__file__).resolve().parent / "evaluate_modules"


def _declared_modules() -> tuple[dict[str, str], dict[str, str]]:
    """The module scripts (registered metric name -> the script's name, ``rapidscore_<name>``,
    for each metric that has one in ``evaluate_modules/``) and their metrics' older names
    (alias -> name), from the registry (``rapidscore.metrics``)."""
    from rapidscore.metrics import all_metrics

    modules = {m.name: f"rapidscore_{m.name}" for m in all_metrics()
               if (_SCRIPTS / f"rapidscore_{m.name}.py").is_file()}
    aliases = {alias: m.name for m in all_metrics() if m.name in modules for alias in m.front_ends.aliases}
    return modules, aliases


# name -> the module script that evaluate.load reads (it imports its class from here)
MODULES, _ALIASES = _declared_modules()


def module_path(name: str = "bertscore") -> str:
    """The path of the module script of ``name`` (a metric with a script: ``"bertscore"``,
    ``"nrr"``, or an older name of one: ``"similarity"``) for ``evaluate.load(path)``.
    Thread-safe (a pure function)."""
    key = _ALIASES.get(name, name)
    if key not in MODULES:
        aliases = ", ".join(f"alias {alias!r} for {target!r}" for alias, target in sorted(_ALIASES.items()))
        raise ValueError(f"unknown rapidscore evaluation module {name!r}: the modules are {sorted(MODULES)}"
                         + (f" ({aliases})" if aliases else ""))
    return str(_SCRIPTS / f"{MODULES[key]}.py")


def _checked(predictions: Any, references: Any) -> tuple[list[str], list[list[str]]]:
    """Predictions and references (one list per prediction), or the error naming the input."""
    missing = [name for name, value in (("predictions", predictions), ("references", references)) if value is None]
    if missing:
        raise IntegrationInputError(f"the module needs both predictions and references; missing: {missing}")
    try:
        return normalize_inputs(predictions, references, names=("predictions", "references"))
    except TypeError as exc:
        raise IntegrationTypeError(str(exc)) from None
    except ValueError as exc:
        raise IntegrationInputError(str(exc)) from None


class _PairModule(evaluate.Metric):
    """Predictions and references (a string or a list per prediction), checked by rapidscore
    before evaluate stores them, stored as one list of references per prediction (so batches of
    either form mix). Subclasses write ``_compute`` and ``_scorer_for``."""

    _description = ""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=self._description, citation="", inputs_description=self._description,
            features=datasets.Features({"predictions": datasets.Value("string", id="sequence"),
                                        "references": datasets.Sequence(datasets.Value("string", id="sequence"),
                                                                        id="references")}),
            codebase_urls=["https://github.com/rapidscore/rapidscore"])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scorers: dict[tuple, Any] = {}  # by options: a model loads once per module
        self._scorers_lock = threading.Lock()

    def _cached(self, key: tuple, build: Any) -> Any:
        with self._scorers_lock:
            scorer = self._scorers.get(key)
            if scorer is None:
                scorer = self._scorers[key] = build()
            return scorer

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> None:
        """Add rows: ``predictions`` (strings) and ``references`` (a string or a list per
        prediction), checked here.
        """
        cands, groups = _checked(predictions, references)
        super().add_batch(predictions=cands, references=groups, **kwargs)

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> None:
        """Add one row: a ``prediction`` (a string) and its ``reference`` (a string or a list).
        """
        if isinstance(prediction, list):
            raise IntegrationTypeError("prediction (one row) must be a str, got a list: add rows with add_batch")
        cands, groups = _checked(None if prediction is None else [prediction],
                                 None if reference is None else [reference])
        super().add(prediction=cands[0], reference=groups[0], **kwargs)

    def compute(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> dict | None:
        """Scores of the rows given here and the rows added before; ``kwargs`` are the
        module's keywords.
        """
        if predictions is not None or references is not None:
            predictions, references = _checked(predictions, references)
        return super().compute(predictions=predictions, references=references, **kwargs)


class BERTScoreModule(_PairModule):
    """rapidscore's BERTScore with the hub ``bertscore`` metric's inputs, keywords and output
    keys (see the module docstring). ``evaluate.load(module_path("bertscore"))`` gives one.
    Not thread-safe (evaluate's module state): one per thread; its scorers are shared."""

    _description = ("BERTScore (rapidscore): predictions against references (a string or a list of strings "
                    "per prediction); returns precision, recall, f1 per prediction and hashcode.")

    def _compute(self, *, predictions: list[str], references: list[list[str]], lang: str | None = None,
                 model_type: str | None = None, num_layers: int | None = None, verbose: bool = False,
                 idf: Any = False, device: Any = None, batch_size: int | None = 64, nthreads: int = 4,
                 all_layers: bool = False, rescale_with_baseline: bool = False, baseline_path: str | None = None,
                 use_fast_tokenizer: bool = False, **engine_options: Any) -> dict:
        from rapidscore.bertscore import BERTScore

        check_positive_int(nthreads, "nthreads")  # bert-score's idf worker count: checked, unused here
        if batch_size is not None:
            batch_size = check_positive_int(batch_size, "batch_size")
        from rapidscore.bertscore.idf import DocumentFrequencies

        if not isinstance(idf, (bool, str, os.PathLike, DocumentFrequencies)):
            raise IntegrationTypeError(f"idf must be a bool (weights from these references), an idf file path or a "
                                       f"DocumentFrequencies, got {type(idf).__name__}")
        options = dict(model=model_type, layer=num_layers, lang=lang, all_layers=all_layers,
                       rescale_with_baseline=rescale_with_baseline, baseline_path=baseline_path,
                       use_fast_tokenizer=use_fast_tokenizer, progress=verbose,
                       device="cpu" if device is None else str(device), **engine_options)
        if idf is True:  # the hub metric's idf: document counts of this call's references
            scorer = BERTScore(idf=True, idf_sents=[ref for group in references for ref in group], **options)
        elif idf is not False:  # counts given: the file is read each call (it may have changed)
            scorer = BERTScore(idf=idf, **options)
        else:
            scorer = self._cached(tuple(sorted((k, repr(v)) for k, v in options.items())),
                                  lambda: BERTScore(**options))
        result = scorer.score(predictions, references, reference_batch_size=batch_size)
        return {"precision": result.precision.tolist(), "recall": result.recall.tolist(), "f1": result.f1.tolist(),
                "hashcode": scorer.signature}


class NRRModule(_PairModule):
    """rapidscore's semantic similarity and Negative Rejection Rate: ``similarity`` and
    ``best_reference`` per prediction (the best of its references), and with ``threshold`` the
    ``rejected`` decisions and ``negative_rejection_rate``; ``hashcode`` is the model's signature.
    Keywords: ``model``, ``method``, ``layer``, ``prompt_name``, ``max_length`` and the engine
    options of ``rapidscore.nrr.SentenceSimilarity``. Not thread-safe (evaluate's module
    state): one per thread; its models are shared."""

    _description = ("Semantic similarity and the Negative Rejection Rate (rapidscore): predictions against "
                    "references (a string or a list per prediction); returns similarity, best_reference and, "
                    "with threshold, rejected and negative_rejection_rate.")

    def _compute(self, *, predictions: list[str], references: list[list[str]], threshold: float | None = None,
                 **options: Any) -> dict:
        from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

        if threshold is not None:
            threshold = check_threshold(threshold)
        model = self._cached(tuple(sorted((k, repr(v)) for k, v in options.items())),
                             lambda: SentenceSimilarity(**options))
        output: dict[str, Any] = {"similarity": [], "best_reference": []}
        if predictions:
            if threshold is not None:
                result = model.rejection(predictions, references, threshold)
                output = {"similarity": result.similarities.tolist(), "best_reference": result.best_reference.tolist(),
                          "rejected": result.rejected.tolist(), "negative_rejection_rate": result.rate}
            else:
                sims, best = model.pairs(predictions, references)
                output = {"similarity": sims.tolist(), "best_reference": best.tolist()}
        return {**output, "hashcode": model.signature}

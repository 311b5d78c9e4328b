"""RGB-style negative rejection: how often a model declines when its documents hold no answer.

The RGB benchmark (Chen et al. 2024, "Benchmarking Large Language Models in Retrieval-Augmented
Generation") measures *negative rejection* as the share of questions whose retrieved documents
are all noise that the model correctly declines to answer. Here: given the responses and, per
question, whether it had no supporting document (``no_support``; left out: every question is
such a question), a refusal detector decides which responses decline (SELECT's ``heuristic`` by
default, the ``embedding`` detector, a preset, a Detector or a callable of
``rapidscore.abstention``, or ``"rgb"``: RGB's own phrase check), and :func:`rgb_negative_rejection` reports

- the **rejection rate**: declined / no-support questions, with a Wilson score interval;
- as a side number, the **false-refusal rate**: declined / supported questions (None when every
  question is a no-support one), with its Wilson interval.

The Wilson score interval (no continuity correction) is the usual interval of a binomial
proportion that stays inside [0, 1] and keeps its coverage near 0 and 1, where a rejection rate
often sits; the SELECT tables' Student-t intervals (``abstention.rates.aggregate``) are over
per-concept means, not over the 0/1 decisions of one set of questions.

The command ``rapidscore rgb FILE`` (``add_arguments`` / ``run`` below) reads a response column
and an optional no-support column of a JSONL / JSON / CSV / TSV / Parquet file.

Thread safety: :func:`rgb_negative_rejection` is as thread-safe as its detector (every detector
rapidscore builds is); a result is immutable. numpy is imported inside the functions, so that the
command's parser (``rapidscore --help``) stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rapidscore.common import intervals
from rapidscore.common.intervals import check_confidence
from rapidscore.common.metric import ColumnError
from rapidscore.errors import FlagError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["FlagError", "RGBRejectionResult", "RGB_PHRASES", "rgb_negative_rejection", "rgb_phrase_detector",
           "wilson_interval", "rgb_signature"]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval (no continuity correction) of ``successes`` out of ``n``
    questions, both counts (``rapidscore.common.intervals.wilson_interval`` computes it):
    ``(low, high)`` within [0, 1]."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(successes, bool) or not isinstance(successes, int) or not 0 <= successes <= n:
        raise ValueError(f"successes must be an int in [0, n={n}], got {successes!r}")
    return intervals.wilson_interval(successes, n, confidence)


def rgb_signature(detector: Any, confidence: float = 0.95, negatives: str = "flagged") -> str:
    """``rgb|method:...|interval:wilson-95|negatives:flagged|...|version:...``: the detector's name
    (and its threshold and model where it has them), the interval, and whether no-support flags
    were given (``flagged``) or every question counted as one (``all``)."""
    from rapidscore.abstention.report import detector_fields
    from rapidscore.common.signature import Signature, version_fields

    fields: list = [("method", getattr(detector, "name", "callable")),
                    ("interval", f"wilson-{100 * confidence:g}"), ("negatives", negatives)]
    fields += detector_fields(detector)
    return str(Signature([*fields, *version_fields()], name="rgb"))


@dataclass(frozen=True)
class RGBRejectionResult:
    """Per question: ``refused`` (the detector's decision) and ``no_support``; the rates and their
    Wilson intervals at ``confidence``; the ``signature``."""

    refused: np.ndarray
    no_support: np.ndarray
    confidence: float
    signature: str

    @property
    def n_negative(self) -> int:
        """Questions without a supporting document."""
        return int(self.no_support.sum())

    @property
    def n_rejected(self) -> int:
        """No-support questions whose response declines (correct rejections)."""
        return int((self.refused & self.no_support).sum())

    @property
    def rejection_rate(self) -> float:
        return self.n_rejected / self.n_negative

    @property
    def rejection_interval(self) -> tuple[float, float]:
        return wilson_interval(self.n_rejected, self.n_negative, self.confidence)

    @property
    def n_supported(self) -> int:
        return int(self.no_support.size - self.n_negative)

    @property
    def n_false_refusals(self) -> int:
        """Supported questions whose response declines."""
        return int((self.refused & ~self.no_support).sum())

    @property
    def false_refusal_rate(self) -> float | None:
        """Declined / supported questions; None when no question had a supporting document."""
        return self.n_false_refusals / self.n_supported if self.n_supported else None

    @property
    def false_refusal_interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.n_false_refusals, self.n_supported, self.confidence) if self.n_supported else None

    def to_dict(self) -> dict:
        """The rates, counts, intervals (``[low, high]``), signature and per-question columns."""
        false_interval = self.false_refusal_interval
        return {"rejection_rate": self.rejection_rate, "rejection_interval": list(self.rejection_interval),
                "n_negative": self.n_negative, "n_rejected": self.n_rejected,
                "false_refusal_rate": self.false_refusal_rate,
                "false_refusal_interval": None if false_interval is None else list(false_interval),
                "n_supported": self.n_supported, "n_false_refusals": self.n_false_refusals,
                "confidence": self.confidence, "signature": self.signature,
                "refused": self.refused.tolist(), "no_support": self.no_support.tolist()}

    def to_frame(self) -> pd.DataFrame:
        """One row per question: no_support, refused (the signature in ``attrs``)."""
        from rapidscore.common.result import import_pandas

        frame = import_pandas().DataFrame({"no_support": self.no_support, "refused": self.refused})
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        low, high = self.rejection_interval
        text = (f"{self.signature} rejection: {self.rejection_rate:.4f} [{low:.4f}, {high:.4f}] "
                f"({self.n_rejected}/{self.n_negative})")
        if self.n_supported:
            rate, (low, high) = self.false_refusal_rate, self.false_refusal_interval  # type: ignore[misc]
            text += f" false refusal: {rate:.4f} [{low:.4f}, {high:.4f}] ({self.n_false_refusals}/{self.n_supported})"
        return text


def check_flags(no_support: Any, n_questions: int) -> np.ndarray:
    """``no_support`` as a bool array of ``n_questions``: every flag a bool (FlagError naming the
    first that is not), as many as the responses and at least one True (ColumnError otherwise)."""
    import numpy as np

    from rapidscore.common.inputs import as_list

    if isinstance(no_support, np.ndarray) and no_support.dtype == bool and no_support.ndim == 1:
        flags = no_support.copy()
    else:
        values = as_list(no_support, "no_support", "a list of bools (True: the question had no supporting document)")
        for index, value in enumerate(values):
            if not isinstance(value, (bool, np.bool_)):
                raise FlagError(f"no_support[{index}] = {value!r:.80} ({type(value).__name__}) is not a bool: "
                                "True marks a question without a supporting document, False one with")
        flags = np.asarray(values, dtype=bool)
    if flags.size != n_questions:
        raise ColumnError(f"no_support has {flags.size} flags for {n_questions} responses: one per question")
    if not flags.any():
        raise ColumnError("no_support marks no question as having no supporting document: the rejection rate "
                          "is over those questions (leave no_support out if every question is one)")
    return flags


#: RGB's own rejection check: its prompt asks for "I can not answer the question because of the
#: insufficient information in documents." (Chinese: 信息不足), and its scripts count a response
#: holding either phrase, case-sensitively, as a rejection
RGB_PHRASES = ("insufficient information", "信息不足")


def rgb_phrase_detector() -> Any:
    """RGB's check as a detector (``method="rgb"``): a response holding one of
    :data:`RGB_PHRASES`, as written (no case folding, no transliteration)."""
    from rapidscore.abstention.detectors import PhraseDetector

    return PhraseDetector(RGB_PHRASES, mode="contains", case_sensitive=True, transliterate=False, name="rgb")


def rgb_negative_rejection(responses: Any, no_support: Any = None, *, method: Any = "heuristic",
                           confidence: float = 0.95, **detector_options: Any) -> RGBRejectionResult:
    """RGB's negative rejection rate of ``responses`` (strings, or chain-of-thought
    ``{"complete", "answer"}`` records; a list, numpy array, pandas Series or pyarrow array).

    ``no_support``: one bool per response, True where the question had no supporting document
    (RGB's noise-only questions); None: every question is one. ``method`` and
    ``detector_options``: the refusal detector, as ``rapidscore.abstention.detect_refusal``
    (``"heuristic"`` default, ``"embedding"`` with ``model``, ``threshold`` and the engine
    keywords, a preset, a Detector or a callable), or ``"rgb"``: RGB's own phrase check
    (:data:`RGB_PHRASES`). SELECT's detectors miss RGB's requested reply "I can not answer ...
    insufficient information ..." ("can not" in two words); use ``"rgb"`` or ``"embedding"``
    where the model was prompted as RGB prompts. ``confidence``: of the Wilson intervals."""
    import numpy as np

    from rapidscore.abstention.detectors import get_detector, response_texts

    confidence = check_confidence(confidence)
    texts = response_texts(responses)
    if not texts:
        raise ColumnError("responses is empty: nothing to evaluate")
    flags = np.ones(len(texts), dtype=bool) if no_support is None else check_flags(no_support, len(texts))
    if isinstance(method, str) and method == "rgb":
        if detector_options:
            raise FlagError(f"method 'rgb' (RGB's phrase check) takes no detector options, got "
                            f"{sorted(detector_options)}")
        detector = rgb_phrase_detector()
    else:
        detector = get_detector(method, **detector_options)
    refused = np.asarray(detector.detect(texts), dtype=bool)
    signature = rgb_signature(detector, confidence, "all" if no_support is None else "flagged")
    return RGBRejectionResult(refused, flags, confidence, signature)


# ---- the command: rapidscore rgb FILE ------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rapidscore.common.cli_options import add_common_options
    from rapidscore.common.file_options import input_option, model_option

    input_option(parser.add_argument("input", help="responses, one record per question: .jsonl, .json, .csv, "
                                              ".tsv, .parquet (.gz too)"))
    parser.add_argument("--response-column", default="response", help="the responses' column (default: response)")
    parser.add_argument("--no-support-column", default=None, metavar="COLUMN",
                        help="a bool column, true where the question had no supporting document (CSV/TSV: "
                        "true/false); left out, every question is a no-support one")
    parser.add_argument("--method", default="heuristic",
                        help="refusal detector: heuristic (default), phrase, keyword, phr+kw, arditi, xstest, "
                        "embedding, or rgb (RGB's phrase check: 'insufficient information' in the response)")
    model_option(parser.add_argument("--model", default=None,
                                     help="the embedding detector's model (default: all-MiniLM-L6-v2)"))
    parser.add_argument("--threshold", type=float, default=None,
                        help="the detector's threshold (keyword: partial-ratio; embedding: cosine)")
    parser.add_argument("--confidence", type=float, default=0.95, help="of the Wilson intervals (default: 0.95)")
    add_common_options(parser)  # --backend/--device/--precision: the embedding detector's encoder


def _flag_cells(values: list) -> list:
    """CSV/TSV cells hold text: "true"/"false" (any case) are the bools; other cells stay as read."""
    words = {"true": True, "false": False}
    return [words.get(v.strip().lower(), v) if isinstance(v, str) else v for v in values]


def run(args: argparse.Namespace) -> int:
    from rapidscore.common.cli_options import encoder_options
    from rapidscore.common.readers import read_column

    options: dict = {}
    if args.threshold is not None:
        if args.method not in ("keyword", "phr+kw", "heuristic", "embedding"):
            raise ValueError(f"--threshold is the keyword and embedding detectors'; --method {args.method} takes none")
        options["threshold"] = args.threshold
    if args.method == "embedding":
        options.update(encoder_options(args))
        if args.model is not None:
            options["model"] = args.model
    elif args.model is not None:
        raise ValueError(f"--model is the embedding detector's; --method {args.method} takes none")
    elif args.method in ("heuristic", "phrase", "keyword", "phr+kw"):
        options["num_threads"] = args.threads
    responses = read_column(args.input, args.response_column)
    no_support = None
    if args.no_support_column is not None:
        no_support = _flag_cells(read_column(args.input, args.no_support_column))
    try:
        result = rgb_negative_rejection(responses, no_support, method=args.method, confidence=args.confidence,
                                        **options)
    except (FlagError, ColumnError) as exc:  # name the file's column, not the function's argument
        raise type(exc)(f"{args.input}: {exc}".replace("no_support", args.no_support_column or "no_support")) \
            from None
    if args.json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(result)
    return 0

"""The detectors' contract: :class:`Detector` (``detector(responses) -> np.ndarray[bool]``) and the
text a detector judges of a response (``response_text``: the response, or a chain-of-thought
record's ``answer``). Every detector module builds on this one (``detectors``, ``classifier``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rapidscore.common.inputs import as_list

__all__ = ["Detector", "response_text", "response_texts"]


def response_text(response, index: int | None = None) -> str:
    """The text a detector judges: the response itself, or a chain-of-thought record's
    ``answer``. Raises TypeError naming the position for anything else."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping) and "answer" in response:
        answer = response["answer"]
        if isinstance(answer, str):
            return answer
    where = "" if index is None else f" at position {index}"
    raise TypeError(
        f"response{where} must be a str or a {{'complete', 'answer'}} dict with a str 'answer', "
        f"got {type(response).__name__}: {response!r:.80}"
    )


def response_texts(responses) -> list[str]:
    """The texts a detector judges, of a list of responses (TypeError naming a bad position)."""
    if isinstance(responses, (str, Mapping)):
        raise TypeError("responses must be a list of responses, not a single response")
    # list, tuple, numpy array, pandas Series or pyarrow array of responses
    return [response_text(r, i) for i, r in enumerate(as_list(responses, "responses", "a list of responses"))]


class Detector:
    """Base class: ``detector(responses) -> np.ndarray[bool]``."""

    name = "detector"

    def __call__(self, responses) -> np.ndarray:
        return self.detect(response_texts(responses))

    def detect(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

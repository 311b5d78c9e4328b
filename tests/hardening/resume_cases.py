"""The streaming commands of the resume matrix (tests/hardening/test_resume_matrix.py): how each
writes its input, breaks a row so that a first run stops part way (as a kill would: the rows of
the chunks before it and their state stay), and which settings each may change."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROWS = 60
CHUNK = 10
SEED = 46  # the rows a first run is stopped at are drawn from it, one per command


@dataclass(frozen=True)
class Family:
    """One streaming command: ``argv(input, output, model)`` runs it with chunks of CHUNK;
    ``row(i)`` is input row ``i``; ``bad`` a row that stops a run (its error contains ``stops``);
    ``changes``: ``(name, first-run options, resume options, what the refusal names)``."""

    name: str
    argv: Callable[[Path, Path, str], list[str]]
    row: Callable[[int], dict]
    bad: dict
    stops: str
    changes: list[tuple[str, list[str], list[str], str]] = field(default_factory=list)
    model_option: str | None = None  # the option that names its model, if it loads one

    def stop_row(self) -> int:
        """The seeded row at which a first run of this command stops (not in its first chunk)."""
        return random.Random(f"{SEED}-{self.name}").randrange(CHUNK + 1, ROWS - CHUNK)


def _pair(i: int) -> dict:
    return {"candidate": f"the cat number {i} sat on the mat {'again ' * (i % 3)}",
            "reference": f"a dog {i} lay on a rug {'there ' * (i % 4)}"}


def _entities(i: int) -> dict:
    text = f"Ada Lovelace met Charles Babbage in London {i}" + "!" * (i % 3)
    predicted = [[0, 12, "PER"]] if i % 2 else [[36, 42, "LOC"], [17, 24, "PER"]]
    # the columns in the metric's order of inputs (the state's digest of the rows read is in that order)
    return {"gold": [[0, 12, "PER"], [17, 32, "PER"], [36, 42, "LOC"]], "predicted": predicted, "text": text}


FAMILIES = {
    "bertscore": Family(
        "bertscore",
        lambda data, out, model: ["bertscore", "--input", str(data), "--output", str(out), "-m", model, "-b", "0",
                                  "--chunk-size", str(CHUNK), "-q"],
        _pair, {"candidate": "a row without its reference"}, "no value in column 'reference'",
        [("-l", [], ["-l", "1"], "-l: null then, 1 now"),
         ("--idf", [], ["--idf"], "--idf: false then, true now"),
         ("--batch-tokens", [], ["--batch-tokens", "64"], "--batch-tokens: null then, 64 now")],
        model_option="-m"),
    "nrr": Family(
        "nrr",
        lambda data, out, model: ["nrr", "--input", str(data), "--output", str(out), "--model", model,
                                  "--chunk-size", str(CHUNK), "-q"],
        lambda i: {"generated": f"answer {i}: the cat sat {'still ' * (i % 3)}", "reference": f"ref {i}: a dog lay"},
        {"generated": "an answer without its reference"}, "no value in column 'reference'",
        [("--threshold", [], ["--threshold", "0.5"], "--threshold: 0.8 then, 0.5 now"),
         ("--method", [], ["--method", "bertscore"], "--method: \"embedding\" then, \"bertscore\" now")],
        model_option="--model"),
    "ner": Family(
        "ner",
        lambda data, out, model: ["ner", "--input", str(data), "--output", str(out), "--label-model", model,
                                  "--chunk-size", str(CHUNK), "-q"],
        _entities, {"gold": [], "text": "a record without its predictions"}, "no column 'predicted'",
        [("--min-jaccard", [], ["--min-jaccard", "0.5"], "--min-jaccard: 0.0 then, 0.5 now"),
         ("--semeval-matching", [], ["--semeval-matching", "nervaluate"],
          "--semeval-matching: \"optimal\" then, \"nervaluate\" now"),
         ("--label-similarity", [], ["--label-similarity", "exact"], "labels:embedding")],
        model_option="--label-model"),
    "refusal": Family(
        "refusal",
        lambda data, out, model: ["refusal", "--input", str(data), "--output", str(out), "--set", "method=keyword",
                                  "--chunk-size", str(CHUNK), "-q"],
        lambda i: {"response": "I cannot help with that." if i % 3 == 0 else f"Sure, answer {i} is Paris."},
        {"response": 3}, "must be a str",
        [("--set method", [], ["--set", "method=phrase"], "--set")]),
    "toy": Family(
        "toy",
        lambda data, out, model: ["toy", "--input", str(data), "--output", str(out), "--chunk-size", str(CHUNK),
                                  "-q"],
        lambda i: {"text": f"text number {i}" + "!" * (i % 5)},
        {"line": "no text column"}, "no column 'text'",
        [("--suffix", [], ["--suffix", "?"], "--suffix: null then, \"?\" now")]),
}


def write_input(path: Path, family: Family, bad_row: int | None = None, edit_row: int | None = None) -> Path:
    """The command's ROWS input rows (``bad_row``: that row replaced by the stopping row;
    ``edit_row``: that row's first text changed, the row count kept)."""
    rows = [family.row(i) for i in range(ROWS)]
    if bad_row is not None:
        rows[bad_row] = family.bad
    if edit_row is not None:
        key = next(key for key, value in rows[edit_row].items() if isinstance(value, str))
        rows[edit_row] = {**rows[edit_row], key: rows[edit_row][key] + " edited"}
        if family.name == "bertscore":  # the reference: what --idf counts documents in
            rows[edit_row]["reference"] = "a completely different reference about zebras and trains"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

"""Options that cannot change a number (issue 47): each says so where it is declared (``run_only``
on a parser's flag, ``Option(run_only=True)`` on a metric's option), and a resume state's
fingerprint (``common/file_run.fingerprint_options``) reads that mark, never a list of names: a
run with other display flags, threads, chunk sizes or memory budgets resumes; a run with another
setting that scores differently does not."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from rapidscore.common.file_run import fingerprint_options
from rapidscore.common.metric import Column, Metric, RequestOption


def _fingerprint(command: str, argv: list[str]) -> dict:
    from rapidscore.cli import build_parser, command_parser

    parser = build_parser()
    args = parser.parse_args([command, *argv])
    return fingerprint_options(command_parser(parser, command)._actions, args)


RUN_ONLY_FLAGS = {
    "bertscore": ["-s", "--table", "-v", "--memory-budget", "3", "--cache-tokens", "5", "--threads", "2",
                  "--chunk-size", "7", "--resume", "-q", "--json", "--progress", "--max-record-bytes", "1M"],
    "nrr": ["--table", "--threads", "2", "--chunk-size", "7", "--resume", "-q", "--json", "--no-progress"],
}
SCORE_CHANGING_FLAGS = {"bertscore": ["--batch-tokens", "64"], "nrr": ["--threshold", "0.5"]}
INPUTS = {"bertscore": ["-c", "a", "-r", "b"], "nrr": ["--generated", "a.txt", "--references", "b.txt"]}


@pytest.mark.parametrize("command", sorted(RUN_ONLY_FLAGS))
def test_run_only_flags_stay_out_of_the_fingerprint(command) -> None:
    plain = _fingerprint(command, INPUTS[command])
    assert _fingerprint(command, [*INPUTS[command], *RUN_ONLY_FLAGS[command]]) == plain
    assert _fingerprint(command, [*INPUTS[command], *SCORE_CHANGING_FLAGS[command]]) != plain


def test_values_no_option_declares_are_not_options() -> None:
    """The command's name and the parser's own defaults (``progress_default``) are not flags."""
    fingerprint = _fingerprint("bertscore", INPUTS["bertscore"])
    assert not {"command", "progress_default", "run_command"} & set(fingerprint)
    assert "--batch-tokens" in fingerprint and "--threads" not in fingerprint


class Budgeted(Metric):
    """A metric with an option that cannot change a number and one that can."""

    name = "budgeted-toy"
    inputs = (Column("text", "text"),)
    outputs = ("length",)
    options = (RequestOption("budget", int, None, "work per chunk", minimum=1, run_only=True),
               RequestOption("offset", int, 0, "added to each length"))

    def build(self, *, budget: int | None = None, offset: int = 0) -> int:
        return offset

    def score(self, engine, columns, names=None) -> dict:
        return {"length": [len(text) + engine for text in columns["text"]]}


@pytest.fixture
def budgeted() -> Iterator[Metric]:
    from rapidscore.metrics import register, unregister

    metric = register(Budgeted())
    yield metric
    unregister(metric.name)


def test_a_metric_option_declared_run_only_stays_out_of_the_generic_commands_fingerprint(budgeted) -> None:
    plain = _fingerprint("budgeted-toy", ["-i", "rows.jsonl"])
    assert _fingerprint("budgeted-toy", ["-i", "rows.jsonl", "--budget", "9"]) == plain
    assert _fingerprint("budgeted-toy", ["-i", "rows.jsonl", "--offset", "2"]) != plain


def test_the_mark_is_read_from_the_action() -> None:
    from rapidscore.common.file_options import is_run_only, run_only

    parser = argparse.ArgumentParser()
    marked = run_only(parser.add_argument("--shown"))
    plain = parser.add_argument("--weight")
    assert is_run_only(marked) and not is_run_only(plain)
    assert fingerprint_options(parser._actions, parser.parse_args(["--shown", "a", "--weight", "b"])) == {
        "--weight": "b"}

"""The one output layer (issue 36): every registered command and each of its output options
refuses an input by path, symlink and hard link, and a failed fresh run keeps an earlier output
byte for byte. The commands and options are read from the parser, not listed here: a command
that comes with a new output option needs only a runnable example below (the generic command of a
registered metric, a user's included, needs none)."""

from __future__ import annotations

import json
import os
import shutil
from importlib import import_module
from pathlib import Path

import pytest

from rapidscore.cli import build_parser, commands, main
from rapidscore.common.file_options import file_options

ROOT = Path(__file__).resolve().parents[2]
PREVIOUS = b"an earlier result, kept byte for byte\n"

# a value per input kind of the metric contract (common/metric.py Column.kind)
SAMPLE_CELLS = {"text": "the cat sat on the mat", "texts": "a cat was sitting", "response": "I cannot help with that.",
                "entities": [], "any": "a value"}


def _parsers():
    parser = build_parser()
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def _write_lines(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _generic_example(name: str, tmp: Path, model: str) -> tuple[list[str], dict[str, Path]]:
    """A run of the generic command of a registered metric: one input row from its columns."""
    from rapidscore.metrics import get_metric

    metric = get_metric(name)
    row = {c.name: SAMPLE_CELLS.get(c.kind, "a value") for c in metric.inputs if not c.optional}
    rows = _write_lines(tmp / "rows.jsonl", [json.dumps(row)] * 3)
    return ["--input", str(rows), "-q"], {"--output": tmp / "out.jsonl"}


def _bertscore_stream(tmp: Path, model: str):
    pairs = _write_lines(tmp / "pairs.jsonl", [json.dumps({"candidate": f"a cat {i} sat", "reference": f"the cat {i}"})
                                               for i in range(5)])
    return (["--input", str(pairs), "-m", model, "-q"],
            {"--output": tmp / "scores.jsonl", "--write-idf": tmp / "idf.json"})


def _bertscore_baseline(tmp: Path, model: str):
    corpus = _write_lines(tmp / "corpus.txt", ["a cat sat", "the dog ran", "birds fly high", "rain falls"])
    return ["--make-baseline", str(corpus), "--pairs", "6", "-m", model, "-q"], {"--out": tmp / "baseline.csv"}


def _bertscore_heatmap(tmp: Path, model: str):
    pytest.importorskip("matplotlib", reason="the heatmap needs the [plot] extra")
    cands = _write_lines(tmp / "cands.txt", ["a cat sat on the mat"])
    refs = _write_lines(tmp / "refs.txt", ["the cat sat"])
    return ["-c", str(cands), "-r", str(refs), "--show", "-m", model, "-q"], {"--fname": tmp / "heatmap.png"}


def _nrr_stream(tmp: Path, model: str):
    rows = _write_lines(tmp / "answers.jsonl", [json.dumps({"generated": "a cat sat", "reference": "the cat sat"})] * 3)
    return ["--input", str(rows), "--model", model, "-q"], {"--output": tmp / "nrr.jsonl"}


def _nrr_plot(tmp: Path, model: str):
    pytest.importorskip("matplotlib", reason="the histogram needs the [plot] extra")
    generated = _write_lines(tmp / "generated.txt", ["a cat sat", "dogs bark"])
    references = _write_lines(tmp / "references.txt", ["the cat sat", "a dog barked"])
    return (["--generated", str(generated), "--references", str(references), "--model", model, "-q"],
            {"--plot": tmp / "histogram.png"})


def _abstention(tmp: Path, model: str):
    pytest.importorskip("matplotlib", reason="the plots need the [plot] extra")
    results = tmp / "results"
    shutil.copytree(ROOT / "examples" / "abstention" / "results", results)
    taxonomy = tmp / "taxonomy.json"
    shutil.copy(ROOT / "examples" / "abstention" / "taxonomy.json", taxonomy)
    return ([str(results), "--taxonomy", str(taxonomy), "--workers", "1", "-q"],
            {"--output": tmp / "table.md", "--plot-dir": tmp / "plots"})


def _export(tmp: Path, model: str):
    pytest.importorskip("torch", reason="export needs the [export] extra")
    copy = tmp / "model"
    shutil.copytree(model, copy)
    return [str(copy), "--layer", "1", "-q"], {"--cache": tmp / "cache"}


def _ner_plots(tmp: Path, model: str):
    pytest.importorskip("matplotlib", reason="the plots need the [plot] extra")
    gold, pred = tmp / "gold.jsonl", tmp / "gliner.jsonl"
    shutil.copy(ROOT / "examples" / "ner" / "gold.jsonl", gold)
    shutil.copy(ROOT / "examples" / "ner" / "gliner.jsonl", pred)
    return (["--gold", str(gold), "--pred", f"gliner={pred}", "--label-similarity", "exact", "-q"],
            {"--plot": tmp / "ner.png", "--plot-by-type": tmp / "ner_by_type.svg"})


def _report(tmp: Path, model: str):
    results = tmp / "system.json"
    results.write_text(json.dumps({"precision": [0.9, 0.5], "recall": [0.8, 0.6], "f1": [0.85, 0.55],
                                   "signature": "model:x|rapidscore"}))
    return [str(results), "-q"], {"--out": tmp / "report.html"}


def _compare(tmp: Path, model: str):
    systems = []
    for name, f1 in (("first", [0.85, 0.55, 0.7]), ("second", [0.8, 0.6, 0.65])):
        path = tmp / f"{name}.json"
        path.write_text(json.dumps({"precision": f1, "recall": f1, "f1": f1, "signature": "model:x|rapidscore"}))
        systems.append(str(path))
    return [*systems, "--paired-bs-n", "50", "--paired-ar-n", "50"], {"--output": tmp / "comparison.txt"}


# runnable examples of the commands that have their own module: each returns (argv without its
# outputs, {output option: where it writes}); together they name every output option
EXAMPLES = {
    "bertscore": [_bertscore_stream, _bertscore_baseline, _bertscore_heatmap],
    "nrr": [_nrr_stream, _nrr_plot],
    "abstention": [_abstention],
    "export": [_export],
    "ner": [_ner_plots],
    "report": [_report],
    "compare": [_compare],
}


def _examples(name: str, tmp: Path, model: str):
    module = commands()[name][0]
    if module is None:
        return [_generic_example(name, tmp, model)]
    return [build(tmp, model) for build in EXAMPLES[name]]


def _outputs_by_command() -> dict[str, list[str]]:
    return {name: [option for option, _action in file_options(parser._actions, "output")]
            for name, parser in _parsers().items() if name in commands()}


def _argv(name: str, base: list[str], outputs: dict[str, Path]) -> list[str]:
    return [name, *base, *(part for option, path in outputs.items() for part in (option, str(path)))]


def test_every_output_option_has_an_example(toy_metric):
    for name, options in _outputs_by_command().items():
        if not options or commands()[name][0] is None:
            continue
        assert name in EXAMPLES, f"rapidscore {name} writes {options}: add a runnable example to EXAMPLES"


def _inputs_of(argv: list[str], name: str) -> list[Path]:
    """The existing files and directories named by the declared input options of ``argv``."""
    from rapidscore.common.file_options import declared_files

    parser = _parsers()[name]
    args, _unknown = parser.parse_known_args(argv[1:])
    return [Path(f.path) for f in declared_files(parser._actions, args)
            if f.spec.role == "input" and os.path.exists(f.path)]


def _cases():
    names = sorted(n for n, options in _outputs_by_command().items() if options)
    return names + ["toy"]  # a metric registered by a user: the generic command, by construction


@pytest.mark.parametrize("name", _cases())
@pytest.mark.parametrize("link", ["path", "symlink", "hardlink"])
def test_an_output_that_is_an_input_is_refused(name, link, tmp_path, tiny_model_path, toy_metric, capsys):
    model = str(tiny_model_path("bert"))
    for k, (base, outputs) in enumerate(_examples(name, tmp_path, model)):
        inputs = _inputs_of(_argv(name, base, outputs), name)
        for option, path in outputs.items():
            directory = option in ("--plot-dir", "--cache")
            candidates = [p for p in inputs if p.is_dir() == directory and (p.is_file() or directory)]
            assert candidates, f"{name} {option}: the example has no input to write over"
            victim = candidates[0]
            if link == "hardlink" and victim.is_dir():
                continue  # directories have no hard links
            before = _snapshot(victim)
            alias = victim if link == "path" else tmp_path / f"alias-{k}-{option.strip('-')}{victim.suffix}"
            if link == "symlink":
                alias.symlink_to(victim)
            elif link == "hardlink":
                os.link(victim, alias)
            status = main(_argv(name, base, {**outputs, option: alias}))
            message = capsys.readouterr().err
            assert status == 2, f"{name} {option} {alias} ({link} to the input {victim}) was not refused"
            assert "would destroy the input" in message and option in message, message
            assert _snapshot(victim) == before, f"{name} {option}: the input {victim} changed"
            if link != "path":
                alias.unlink()


def _snapshot(path: Path):
    if path.is_dir():
        return sorted((str(p.relative_to(path)), p.read_bytes() if p.is_file() else None) for p in path.rglob("*"))
    return path.read_bytes()


def _put_previous(path: Path, directory: bool) -> None:
    if directory:
        path.mkdir(exist_ok=True)
        (path / "earlier.txt").write_bytes(PREVIOUS)
    else:
        path.write_bytes(PREVIOUS)


class InjectedFailure(RuntimeError):
    pass


@pytest.mark.parametrize("name", _cases())
def test_a_failed_fresh_run_keeps_the_previous_outputs(name, tmp_path, tiny_model_path, toy_metric, monkeypatch,
                                                       capsys):
    """Each command runs to its end, every output written, and then fails: the earlier outputs
    are still there byte for byte. The same run without the failure replaces them (the check can
    fail)."""
    from rapidscore.metric_cli import MetricCommand

    model = str(tiny_model_path("bert"))
    module_name = commands()[name][0]
    owner = MetricCommand if module_name is None else import_module(module_name)
    real_run = owner.run

    def failing_run(*args):
        real_run(*args)
        raise InjectedFailure("after every output was written")

    for base, outputs in _examples(name, tmp_path, model):
        for option, path in outputs.items():
            _put_previous(path, option in ("--plot-dir", "--cache"))
        before = {option: _snapshot(path) for option, path in outputs.items()}
        with monkeypatch.context() as patch:
            patch.setattr(owner, "run", failing_run)
            assert main(_argv(name, base, outputs)) == 2
        assert "after every output was written" in capsys.readouterr().err
        for option, path in outputs.items():
            if path.is_dir():  # a directory output (plots, a cache) keeps every earlier file
                assert (path / "earlier.txt").read_bytes() == PREVIOUS, f"{name} {option}: a failed run lost a file"
                if option == "--plot-dir":  # its plots are the run's: none until it succeeds
                    assert _snapshot(path) == before[option], f"{name} {option}: a failed run wrote into {path}"
            else:
                assert _snapshot(path) == before[option], f"{name} {option}: a failed run changed {path}"
        # temporary files go; a stream's partial rows and state stay for --resume (stream_io.py)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name)
        assert not leftovers, f"{name}: a failed run left {leftovers}"
        # the same run, succeeding, replaces them: the check above could fail
        assert main(_argv(name, base, outputs)) == 0, capsys.readouterr().err
        for option, path in outputs.items():
            assert _snapshot(path) != before[option], f"{name} {option}: a successful run left {path} as it was"

"""The command line: parsers load no metric code, and every command takes the common options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rapidscore.cli import build_parser, commands, main
from rapidscore.common.cli_options import positive_int

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "rapidscore.bertscore.scorer", "rapidscore._core", "onnxruntime", "torch", "pandas", "pyarrow")


@pytest.mark.parametrize("argv", [["--help"], ["bertscore", "--help"], ["nrr", "--help"], ["ner", "--help"],
                                  ["abstention", "--help"]])
def test_help_imports_no_metric_code(argv):
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['rapidscore', *{argv!r}]\n"
            "try:\n    runpy.run_module('rapidscore.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: rapidscore" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_importtime_of_bertscore_help():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "rapidscore.cli", "bertscore", "--help"],
                         capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "--nthreads" in out.stdout and "rapidscore.common.cli_options" in imported
    assert not imported & {"numpy", "rapidscore.bertscore.scorer", "rapidscore._core", "onnxruntime"}


def subcommand_options(name: str) -> dict:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[name]
    return {option: action for action in sub._actions for option in action.option_strings}


MODEL_COMMANDS = ("bertscore", "nrr", "ner", "abstention")  # abstention: its embedding detector


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_command_has_the_common_options(command):
    options = subcommand_options(command)
    for flag in ("--threads", "--json", "--progress", "--no-progress", "-q", "--quiet"):
        assert flag in options, flag
    # issue 27: --threads N means the same everywhere: N >= 1, left out = all cores (None)
    assert options["--threads"].type is positive_int and options["--threads"].default is None
    if command in MODEL_COMMANDS:
        assert options["--backend"].choices == ("onnx", "openvino", "torch")
        assert options["--device"].choices == ("cpu", "cuda")
        assert options["--precision"].choices == ("fp32", "bf16", "fp16", "int8", "fast")


def parse(argv):
    return build_parser().parse_args(argv)


@pytest.mark.parametrize("command", sorted(commands()))
def test_threads_zero_is_refused_by_every_command(command, capsys) -> None:
    # issue 27: 0 meant "all cores" for ner and abstention only, an error elsewhere; now the parser
    # refuses it everywhere, naming the option
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--threads", "0"])
    err = capsys.readouterr().err
    assert "argument --threads" in err and "must be a positive integer, got 0" in err


def test_refusal_command_passes_threads_to_the_detector(tmp_path, monkeypatch, capsys) -> None:
    # issue 27: the generic command's --threads reached no detector; now it is num_threads
    import rapidscore.abstention.detectors as detectors

    built = []
    original = detectors.SelectDetector.__init__

    def recording_init(self, *args, **kwargs):
        built.append(kwargs.get("num_threads"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(detectors.SelectDetector, "__init__", recording_init)
    source = tmp_path / "responses.jsonl"
    source.write_text('{"response": "I cannot help with that."}\n{"response": "Sure."}\n')
    assert main(["refusal", "-i", str(source), "-o", str(tmp_path / "out.jsonl"), "--set", "method=keyword",
                 "--threads", "2", "-q"]) == 0
    assert built == [2]


def test_common_option_values_and_aliases():
    args = parse(["bertscore", "-c", "a", "-r", "b", "--nthreads", "3", "-v", "--backend", "torch", "--precision",
                  "bf16", "--device", "cuda", "--no-progress", "-q", "--json"])
    assert (args.threads, args.verbose, args.backend, args.precision, args.device) == (3, True, "torch", "bf16", "cuda")
    assert (args.progress, args.quiet, args.json) == (False, True, True)
    assert parse(["bertscore", "--threads", "2"]).threads == 2
    assert parse(["abstention", "r", "--threads", "4", "--no-progress"]).threads == 4
    # issue 27: one default for every command (None = all cores; it used to be 0 for these two)
    assert parse(["abstention", "r"]).threads is None and parse(["ner", "--gold", "g"]).threads is None

    from rapidscore.common.cli_options import encoder_options, show_progress

    from rapidscore.common.progress import stderr_is_terminal

    # issue 40 item 3: one policy, a bar by default only where stderr is a terminal
    assert show_progress(parse(["nrr", "--generated", "g", "--references", "r"])) is stderr_is_terminal()
    assert show_progress(parse(["nrr", "--generated", "g", "--references", "r", "-q"])) is False
    assert show_progress(parse(["nrr", "--generated", "g", "--references", "r", "-q", "--progress"])) is True
    assert show_progress(parse(["ner", "--gold", "g"])) is stderr_is_terminal()  # the same default everywhere
    assert encoder_options(parse(["ner", "--gold", "g", "--threads", "2", "--device", "cuda"])) == {
        "backend": None, "device": "cuda", "precision": "fp32", "num_threads": 2}


@pytest.mark.slow
def test_bertscore_reads_every_format_and_keeps_the_text_semantics(minilm_path, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cands, refs = ["  the cat sat on the mat ", "a dog barked"], ["a cat sat on a mat", "the dog barked loudly"]
    (tmp_path / "c.txt").write_text("\n".join(cands) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": [c.strip() for c in cands]}), tmp_path / "c.parquet")
    pq.write_table(pa.table({"text": refs}), tmp_path / "r.parquet")
    common = ["-m", str(minilm_path), "-l", "3", "--json", "-q"]
    assert main(["bertscore", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"), *common]) == 0
    from_text = json.loads(capsys.readouterr().out)
    assert main(["bertscore", "-c", str(tmp_path / "c.parquet"), "-r", str(tmp_path / "r.parquet"),
                 "--column", "text", "--threads", "1", *common]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == from_text["f1"]
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{"text": 3}\n', encoding="utf-8")
    assert main(["bertscore", "-c", str(tmp_path / "bad.jsonl"), "-r", str(tmp_path / "bad.jsonl"),
                 "--column", "text", *common]) == 2
    assert f"{tmp_path / 'bad.jsonl'}:2: expected a string, got int" in capsys.readouterr().err


@pytest.mark.slow
def test_nrr_cli_with_common_options_and_list_references(minilm_path, tmp_path, capsys):
    rows = [{"generated": "a cat sat", "reference": ["a cat sat", "x"]}, {"generated": "a dog", "reference": "zzz"}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["nrr", "--generated", str(path), "--references", str(path), "--model", str(minilm_path),
                 "--json", "--threads", "1", "--backend", "onnx", "-q"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["best_reference"][0] == 0 and document["similarities"][0] == pytest.approx(1.0, abs=1e-5)
    assert "backend:onnx-cpu" in document["signature"] and captured.err == ""


def test_ner_cli_json_carries_the_signature(capsys):
    example = ROOT / "examples" / "ner"
    assert main(["ner", "--gold", str(example / "gold.jsonl"), "--pred", f"gliner={example / 'gliner.jsonl'}",
                 "--label-similarity", "exact", "--json", "-q", "--threads", "1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["gliner"]["signature"].startswith("ner|labels:exact|")


def test_abstention_cli_json_flag_and_quiet(tmp_path, capsys):
    results = os.path.join(ROOT, "examples", "abstention", "results")
    assert main(["abstention", results, "--json", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    # the example taxonomy.json beside results/ is paired automatically
    assert document["meta"]["signature"].startswith("abstention|method:heuristic|taxonomy:taxonomy.json|")
    assert {r["metric"] for r in document["rows"]} >= {"abstention", "specificity"}

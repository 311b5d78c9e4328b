"""The command line under misuse (issue 29): outputs that are inputs, tracebacks, bad numbers,
idf files of one model under two names, and the newcomer paper cuts of item 17."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rapidscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [{"candidate": "a cat sat on the mat", "reference": "the cat sat"},
         {"candidate": "dogs bark", "reference": "a dog barked loudly"}]


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def write_pairs(path: Path) -> Path:
    return write_lines(path, (json.dumps(row) for row in PAIRS))


def error_line(capsys) -> str:
    """The one line a failed command prints on stderr (anything else there fails the test)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- item 1: an output that is an input file ------------------------------------------------------------

def _same_file_cases(tmp: Path, model: str):
    """(id, argv, the input file that must survive) for every command and option that writes a file."""
    pairs = write_pairs(tmp / "pairs.jsonl")
    cands = write_lines(tmp / "cands.txt", ["a cat sat on the mat", "dogs bark"])
    refs = write_lines(tmp / "refs.txt", ["the cat sat", "a dog barked loudly"])
    answers = write_lines(tmp / "answers.jsonl", (json.dumps({"generated": r["candidate"], "reference":
                                                              r["reference"]}) for r in PAIRS))
    os.symlink(pairs, tmp / "link.jsonl")
    os.link(refs, tmp / "hardlink.txt")
    flat = write_lines(tmp / "flat.jsonl", (json.dumps({"model": "m", "technique": "t", "eval_type": "abstention",
                                                        "seed": 0, "concept": "c", "question": "q?",
                                                        "response": "I cannot help."})
                                            for _ in range(2)))
    bert = ["bertscore", "-m", model, "-q"]
    return [
        ("bertscore-input-is-output", [*bert, "--input", str(pairs), "--output", str(pairs)], pairs),
        ("bertscore-output-links-to-input", [*bert, "--input", str(pairs), "--output", str(tmp / "link.jsonl")],
         pairs),
        ("bertscore-output-is-a-reference-file", [*bert, "-c", str(cands), "-r", str(refs), "--output-format",
                                                   "jsonl", "--output", str(refs)], refs),
        ("bertscore-output-hard-links-to-a-reference", [*bert, "-c", str(cands), "-r", str(refs),
                                                        "--output-format", "jsonl", "--output",
                                                        str(tmp / "hardlink.txt")], refs),
        ("bertscore-write-idf-over-input", [*bert, "--input", str(pairs), "--write-idf", str(pairs)], pairs),
        ("bertscore-idf-file-is-output", [*bert, "--input", str(pairs), "--idf-file", str(refs), "--output-format",
                                          "jsonl", "--output", str(refs)], refs),
        ("bertscore-heatmap-over-input", [*bert, "-c", str(cands), "-r", str(refs), "--show", "--fname",
                                          str(cands)], cands),
        ("bertscore-baseline-over-corpus", [*bert, "--make-baseline", str(cands), "--out", str(cands),
                                            "--pairs", "4"], cands),
        ("nrr-input-is-output", ["nrr", "--model", model, "-q", "--input", str(answers), "--output",
                                 str(answers)], answers),
        ("nrr-output-is-a-reference-file", ["nrr", "--model", model, "-q", "--generated", str(cands),
                                            "--references", str(refs), "--output-format", "csv", "--output",
                                            str(refs)], refs),
        ("nrr-plot-over-input", ["nrr", "--model", model, "-q", "--generated", str(cands), "--references",
                                 str(refs), "--plot", str(cands)], cands),
        ("abstention-output-over-flat-table", ["abstention", str(flat), "-q", "--output", str(flat)], flat),
    ]


CASE_IDS = ["bertscore-input-is-output", "bertscore-output-links-to-input", "bertscore-output-is-a-reference-file",
            "bertscore-output-hard-links-to-a-reference", "bertscore-write-idf-over-input",
            "bertscore-idf-file-is-output", "bertscore-heatmap-over-input", "bertscore-baseline-over-corpus",
            "nrr-input-is-output", "nrr-output-is-a-reference-file", "nrr-plot-over-input",
            "abstention-output-over-flat-table"]


@pytest.mark.parametrize("case", CASE_IDS)
def test_an_output_that_is_an_input_file_is_refused_before_anything_is_written(case, tmp_path, tiny_bert,
                                                                             capsys) -> None:
    # issue 29 item 1
    cases = {name: (argv, kept) for name, argv, kept in _same_file_cases(tmp_path, tiny_bert)}
    argv, kept = cases[case]
    before = kept.read_bytes()
    listing = sorted(os.listdir(tmp_path))
    assert main(argv) == 2
    line = error_line(capsys)
    assert "is the input" in line and str(kept.name) in line, line
    assert kept.read_bytes() == before  # not truncated, not replaced
    assert sorted(os.listdir(tmp_path)) == listing  # no resume state, no parts folder, no temp file


def test_two_outputs_on_one_file_are_refused(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 1: --write-idf and --output naming one file would overwrite each other
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / "out.jsonl"
    assert main(["bertscore", "-m", tiny_bert, "--input", str(pairs), "--output", str(out), "--write-idf",
                 str(out)]) == 2
    assert "--write-idf" in error_line(capsys) and not out.exists()


def test_an_output_beside_its_input_still_streams(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 1: the check refuses only the same file (a name that merely looks alike is fine)
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / "sub" / ".." / "scores.jsonl"
    (tmp_path / "sub").mkdir()
    assert main(["bertscore", "-m", tiny_bert, "-q", "--input", str(pairs), "--output", str(out)]) == 0
    assert len((tmp_path / "scores.jsonl").read_text().splitlines()) == 2


def test_write_idf_beside_an_unweighted_stream(tmp_path, tiny_bert, capsys) -> None:
    # found with item 1's cases: --write-idf FILE --output OUT without --idf handed the counts to an
    # unweighted scorer ("idf= was given but the scorer was created with idf=False")
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    common = ["bertscore", "-m", tiny_bert, "-l", "1", "-q", "--input", str(pairs)]
    assert main([*common, "--output", str(tmp_path / "plain.jsonl")]) == 0
    assert main([*common, "--output", str(tmp_path / "out.jsonl"), "--write-idf", str(tmp_path / "idf.json")]) == 0
    assert (tmp_path / "out.jsonl").read_text() == (tmp_path / "plain.jsonl").read_text()
    assert json.loads((tmp_path / "idf.json").read_text())["n_documents"] == 2


# -- item 14: tracebacks ---------------------------------------------------------------------------

def test_a_batch_size_beyond_int64_is_one_batch_in_the_api(tiny_bert) -> None:
    # issue 29 item 14: reference_batch_size=10**20 raised a bare OverflowError; any size >= the
    # number of pairs is one batch, as in bert-score
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(model=tiny_bert, layer=1)
    cands, refs = [p["candidate"] for p in PAIRS], [p["reference"] for p in PAIRS]
    huge = scorer.score(cands, refs, reference_batch_size=10**20)
    one_batch = scorer.score(cands, refs, reference_batch_size=len(cands))
    assert huge.f1.tolist() == one_batch.f1.tolist()


def test_cli_batch_size_beyond_int64(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 14: `-b 99999999999999999999` printed an OverflowError traceback
    cands = write_lines(tmp_path / "c.txt", [p["candidate"] for p in PAIRS])
    refs = write_lines(tmp_path / "r.txt", [p["reference"] for p in PAIRS])
    common = ["bertscore", "-c", str(cands), "-r", str(refs), "-m", tiny_bert, "-l", "1", "--json", "-q"]
    assert main([*common, "-b", "99999999999999999999"]) == 0
    huge = json.loads(capsys.readouterr().out)["f1"]
    assert main([*common, "-b", "2"]) == 0
    assert huge == json.loads(capsys.readouterr().out)["f1"]


def test_a_stream_refuses_a_batch_size_beyond_its_read_ahead_before_making_the_output(tmp_path, tiny_bert,
                                                                                     capsys) -> None:
    # issue 29 items 1 and 3: the refusal came from inside the stream, after the output file was made
    cands = write_lines(tmp_path / "c.txt", [p["candidate"] for p in PAIRS])
    refs = write_lines(tmp_path / "r.txt", [p["reference"] for p in PAIRS])
    out = tmp_path / "scores.jsonl"
    assert main(["bertscore", "-c", str(cands), "-r", str(refs), "-m", tiny_bert, "-l", "1", "-q",
                 "--output", str(out), "--chunk-size", "100", "-b", "99999999999999999999"]) == 2
    assert "reference_batch_size=99999999999999999999 over a stream" in error_line(capsys)
    assert not out.exists() and not (tmp_path / "scores.jsonl.resume.json").exists()


def test_an_unexpected_exception_is_one_line_and_exit_2(monkeypatch, capsys) -> None:
    # issue 29 item 14: every CLI error is one line, exit 2 (a bug too: RAPIDSCORE_DEBUG=1 shows the traceback)
    import rapidscore.abstention.cli as abstention_cli

    def broken(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(abstention_cli, "run", broken)
    assert main(["abstention", "results"]) == 2
    line = error_line(capsys)
    assert line.startswith("rapidscore abstention: error: ") and "ZeroDivisionError: division by zero" in line
    assert "RAPIDSCORE_DEBUG=1" in line
    monkeypatch.setenv("RAPIDSCORE_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["abstention", "results"])


def test_a_message_of_several_lines_prints_as_one(monkeypatch, capsys) -> None:
    # issue 29 item 14: the hub's errors carry newlines
    import rapidscore.abstention.cli as abstention_cli

    def failing(args):
        raise ValueError("model 'x' is not cached.\nAn error happened while trying to locate the files\n")

    monkeypatch.setattr(abstention_cli, "run", failing)
    assert main(["abstention", "results"]) == 2
    assert error_line(capsys) == ("rapidscore abstention: error: model 'x' is not cached. An error happened while "
                                  "trying to locate the files")


@pytest.mark.parametrize(("argv", "option"), [
    (["bertscore", "--input", "p.jsonl", "--output", "o.jsonl", "--chunk-size", "0"], "--chunk-size"),
    (["nrr", "--input", "p.jsonl", "--output", "o.jsonl", "--chunk-size", "-3"], "--chunk-size"),
    (["bertscore", "-c", "a", "-r", "b", "-b", "-1"], "-b/--batch_size"),
    (["bertscore", "-c", "a", "-r", "b", "--batch-tokens", "0"], "--batch-tokens"),
    (["bertscore", "--input", "p.jsonl", "--output", "o.jsonl", "--cache-tokens", "-1"], "--cache-tokens"),
    (["bertscore", "--input", "p.jsonl", "--output", "o.jsonl", "--memory-budget", "nan"], "--memory-budget"),
    (["nrr", "--generated", "g", "--references", "r", "--threads", "-2"], "--threads"),
    (["bertscore", "-c", "a", "-r", "b", "--chunk-size", "zero"], "--chunk-size"),
])
def test_bad_numbers_are_one_line_naming_the_option(argv, option, capsys, tmp_path, monkeypatch) -> None:
    # issue 29 item 6 (--chunk-size 0 ran with the default chunk) and item 14 (one line, exit 2)
    monkeypatch.chdir(tmp_path)  # the relative names above, were they opened, land here
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    line = error_line(capsys)
    assert line.startswith(f"rapidscore {argv[0]}: error: argument {option}: "), line


def test_parse_errors_are_one_line(capsys) -> None:
    # issue 29 item 14: argparse's usage dump is not part of the one error line
    with pytest.raises(SystemExit):
        main(["bertscore", "--no-such-option"])
    line = error_line(capsys)
    assert "unrecognized arguments: --no-such-option" in line and "rapidscore bertscore --help" in line


# -- item 15: one model, two names -----------------------------------------------------------------

def test_idf_counts_of_the_embedded_model_under_either_name() -> None:
    # issue 29 item 15: "all-MiniLM-L6-v2" and "sentence-transformers/all-MiniLM-L6-v2" are one model
    from rapidscore.bertscore.idf import DocumentFrequencies

    short = DocumentFrequencies({101: 1}, 1, tokenizer="all-MiniLM-L6-v2")
    full = DocumentFrequencies({102: 1}, 1, tokenizer="sentence-transformers/all-MiniLM-L6-v2")
    short.check_model("sentence-transformers/all-MiniLM-L6-v2")
    full.check_model("all-MiniLM-L6-v2")
    assert short.to_dict()["tokenizer"] == full.to_dict()["tokenizer"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert short.merge(full).n_documents == 2
    with pytest.raises(ValueError, match=r"made with 'sentence-transformers/all-MiniLM-L6-v2'.*'bert-base-uncased'"):
        full.check_model("bert-base-uncased")


def test_idf_counts_of_a_model_directory_under_two_spellings(tmp_path, tiny_bert) -> None:
    # issue 29 item 15: "dir/", "dir/../dir" and a symlink to dir name one model
    from rapidscore.bertscore.idf import DocumentFrequencies

    os.symlink(tiny_bert, tmp_path / "alias")
    counts = DocumentFrequencies({5: 1}, 1, tokenizer=tiny_bert + os.sep)
    counts.save(tmp_path / "idf.json")
    loaded = DocumentFrequencies.load(tmp_path / "idf.json")
    loaded.check_model(str(tmp_path / "alias"))
    loaded.check_model(os.path.join(tiny_bert, "..", os.path.basename(tiny_bert)))
    with pytest.raises(ValueError, match="made with"):
        loaded.check_model(str(tmp_path))


@pytest.mark.slow
def test_idf_file_of_the_short_name_scores_with_the_default_scorer(tmp_path) -> None:
    # issue 29 item 15, as docs/scale.md does it: counts from model="all-MiniLM-L6-v2", scored by BERTScore()
    from rapidscore.bertscore import BERTScore

    pairs = [(p["candidate"], p["reference"]) for p in PAIRS]
    BERTScore(model="all-MiniLM-L6-v2", idf=True).document_frequencies(pairs).save(tmp_path / "idf.json")
    streamed = [score.f1 for score in BERTScore(idf=True).score_iter(iter(pairs), idf=tmp_path / "idf.json")]
    in_memory = BERTScore(idf=True).score([c for c, _ in pairs], [r for _, r in pairs]).f1.tolist()
    assert streamed == pytest.approx(in_memory, abs=0)


# -- item 16 (last part): --make-baseline --out in a missing directory -------------------------------

def test_make_baseline_into_a_missing_directory_creates_nothing(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 16: the parent directories were created (at the filesystem root too)
    corpus = write_lines(tmp_path / "corpus.txt", ["a cat", "a dog", "the bird sang"])
    out = tmp_path / "missing" / "dir" / "baseline.tsv"
    assert main(["bertscore", "--make-baseline", str(corpus), "-m", tiny_bert, "--out", str(out),
                 "--pairs", "4", "-q"]) == 2
    assert f"{out.parent}" in error_line(capsys)
    assert not (tmp_path / "missing").exists()


def test_compute_baseline_into_a_missing_directory(tmp_path, tiny_bert) -> None:
    # issue 29 item 16: the API refuses before scoring, and creates no directory
    from rapidscore.bertscore import compute_baseline

    with pytest.raises(FileNotFoundError, match="no such directory"):
        compute_baseline(["a cat", "a dog"], tiny_bert, n_pairs=2, out_path=tmp_path / "missing" / "b.tsv")
    assert not (tmp_path / "missing").exists()


# -- item 17: newcomer paper cuts ------------------------------------------------------------------

def test_model_not_found_names_the_hf_command(monkeypatch) -> None:
    # issue 29 item 17: huggingface_hub's CLI is `hf` now
    from rapidscore.encoder.model_source import resolve_model
    from rapidscore.errors import ModelNotFoundError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("nosuch-org/nosuch-model")
    assert "hf download nosuch-org/nosuch-model" in str(info.value)
    assert "huggingface-cli" not in str(info.value)


@pytest.mark.parametrize(("lang", "fragments"), [
    ("xx", ["--lang 'xx' is not a language bert-score has a model or a baseline for",
            "bert-base-multilingual-cased", "en, en-sci, tr, zh"]),
    ("de", ["--lang 'de': bert-score's model for it is bert-base-multilingual-cased"]),
])
def test_lang_says_whether_bert_score_knows_the_language(lang, fragments, monkeypatch, capsys) -> None:
    # issue 29 item 17: `--lang xx` only reported the missing multilingual model
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["bertscore", "-c", "a cat", "-r", "a dog", "--lang", lang, "-q"]) == 2
    line = error_line(capsys)
    for fragment in fragments:
        assert fragment in line, line
    assert "is not a local directory and not in the Hugging Face cache" in line


def test_empty_inputs_are_nothing_to_evaluate_in_every_command(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 17: bertscore printed F1 0.000000 and exit 0 where nrr said "nothing to evaluate"
    empty_c, empty_r = write_lines(tmp_path / "c.txt", []), write_lines(tmp_path / "r.txt", [])
    assert main(["bertscore", "-c", str(empty_c), "-r", str(empty_r), "-m", tiny_bert, "-q"]) == 2
    assert f"nothing to evaluate: {empty_c} is empty" in error_line(capsys)
    assert main(["nrr", "--generated", str(empty_c), "--references", str(empty_r), "--model", tiny_bert, "-q"]) == 2
    assert f"nothing to evaluate: {empty_c} is empty" in error_line(capsys)


def test_ner_gold_written_to_parquet_by_pandas(tmp_path, capsys) -> None:
    # issue 29 item 17: pandas writes the seed dicts as one struct of every key, None where a
    # record lacks one
    pd = pytest.importorskip("pandas", reason="pandas writes the Parquet file of this case")
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow")
    example = ROOT / "examples" / "ner"
    pd.read_json(example / "gold.jsonl", lines=True).to_parquet(tmp_path / "gold.parquet")
    common = ["ner", "--pred", f"gliner={example / 'gliner.jsonl'}", "--label-similarity", "exact", "--json", "-q"]
    assert main([*common, "--gold", str(example / "gold.jsonl")]) == 0
    from_jsonl = json.loads(capsys.readouterr().out)
    assert main([*common, "--gold", str(tmp_path / "gold.parquet")]) == 0
    from_parquet = json.loads(capsys.readouterr().out)
    assert from_parquet["gliner"]["dmberta"] == from_jsonl["gliner"]["dmberta"]
    assert from_parquet["gliner"]["semeval"] == from_jsonl["gliner"]["semeval"]


def test_verbose_prints_timings(tmp_path, tiny_bert, capsys) -> None:
    # issue 29 item 17: -v promised timings it never printed
    argv = ["bertscore", "-c", "a cat sat", "-r", "a dog sat", "-m", tiny_bert, "-l", "1", "--no-progress"]
    assert main(argv) == 0
    assert "seconds" not in capsys.readouterr().err
    assert main([*argv, "-v"]) == 0
    err = capsys.readouterr().err
    assert "model loaded in" in err and "scored 1 pair in" in err and "pairs/s" in err, err


def test_ner_quiet_prints_the_table_only(capsys) -> None:
    # issue 29 item 17: `ner -q` still printed the repair lines
    example = ROOT / "examples" / "ner"
    argv = ["ner", "--gold", str(example / "gold.jsonl"), "--pred", f"gliner={example / 'gliner.jsonl'}",
            "--label-similarity", "exact"]
    assert main(argv) == 0
    assert "gold repairs:" in capsys.readouterr().out
    assert main([*argv, "-q"]) == 0
    out = capsys.readouterr().out
    assert "repairs" not in out and out.lstrip().startswith("| Model |")


def test_abstention_missing_taxonomy_fails_before_reading_results(monkeypatch, capsys) -> None:
    # issue 29 item 17: `--taxonomy nosuch.json` read every results file first
    import rapidscore.abstention.pipeline as pipeline

    def must_not_run(*args, **kwargs):
        raise AssertionError("the results were read before the taxonomy was checked")

    monkeypatch.setattr(pipeline, "evaluate", must_not_run)
    results = str(ROOT / "examples" / "abstention" / "results")
    assert main(["abstention", results, "--taxonomy", "nosuch.json"]) == 2
    assert "nosuch.json" in error_line(capsys)
    assert main(["abstention", results, "--taxonomy", "exp=nosuch.json"]) == 2
    assert "nosuch.json" in error_line(capsys)


# Top-level folders where checkouts, caches and scratch files live: a test that names a path under
# one of them passes or fails with the machine and the checkout's place. Bare names, so that this
# list is no offender itself.
MACHINE_FOLDERS = ("tmp", "var", "work", "home", "root", "mnt", "media", "srv", "opt", "data", "scratch",
                   "shared", "Users", "Volumes", "private")


def location_dependent_strings(source: str, checkout: Path) -> list[tuple[int, str]]:
    """String constants of a test module that name a place outside the test's own files: a path
    beside the checkout, an absolute path under a machine folder, or "../..." relative to the
    working directory. Paths inside the checkout are built from __file__ (ROOT), never written out."""
    import ast

    beside = str(checkout.parent).rstrip(os.sep) + os.sep
    roots = {os.sep + name for name in MACHINE_FOLDERS}
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        first = os.sep + text.lstrip(os.sep).split(os.sep, 1)[0] if text.startswith(os.sep) else ""
        if text.startswith((beside, f"..{os.sep}")) or first in roots:
            found.append((node.lineno, text))
    return found


def test_no_test_reads_beside_the_checkout_by_an_absolute_path() -> None:
    # issue 29 item 17: the SELECT taxonomy test read /work/shared/... and failed in any other checkout;
    # issue 36 row 11: the rule itself depended on the checkout's place ("/tmp/rs" passed in
    # /work/main, failed in a clone under /tmp): absolute paths under any machine folder are refused
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line, text in location_dependent_strings(path.read_text(encoding="utf-8"), ROOT):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not offenders, "use tmp_path, or a path built from __file__: " + "; ".join(offenders)


def _absolute(*parts: str) -> str:
    """An absolute POSIX path from bare names (written out, it would be an offender of the rule)."""
    return "/" + "/".join(parts)


@pytest.mark.parametrize("checkout", [("work", "main"), ("tmp", "rsclone"), ("home", "someone", "src", "rapidscore")])
def test_the_location_rule_does_not_depend_on_the_checkout(checkout) -> None:
    # issue 36 row 11: the same strings are offenders wherever the checkout lives
    if os.sep != "/":
        pytest.skip("POSIX paths")
    offending = [_absolute("tmp", "rs"), _absolute("work", "shared", "data", "x.json"), _absolute("tmp"),
                 _absolute("home", "me", "") + "{A}", "/".join(["..", "shared", "data"])]
    harmless = [_absolute("v1", "bertscore"), _absolute("health"), "en/../..", "..", _absolute("dev", "null"),
                _absolute("tmpfile-not-a-folder"), "a/tmp/b"]
    source = "".join(f"X{i} = f{text!r}\n" for i, text in enumerate(offending + harmless))
    found = sorted(text for _, text in location_dependent_strings(source, Path(_absolute(*checkout))))
    assert found == sorted(offending[:3] + [_absolute("home", "me", ""), offending[4]]), found
    beside = str(Path(_absolute(*checkout)).parent / "elsewhere" / "x.json")  # beside the checkout, wherever
    assert location_dependent_strings(f"A = {beside!r}\n", Path(_absolute(*checkout))) == [(1, beside)]

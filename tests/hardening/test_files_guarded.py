"""Every file a run touches is guarded (issue 46, items 4, 9 and 10).

4. A loaded model's files are inputs of the run: an output inside the directory of a model named
   on the command line is refused before the run starts, and one inside the directory of a model
   loaded otherwise (the embedded default) when it loads, or at the latest before the output
   replaces its target.
9. The temporary file of a batch output (a baseline, a plot, an idf file) killed with -9 is
   removed by the next run that writes the same target; one of a process still running is kept.
10. A failed write names the file, whatever the writer (matplotlib, a special file, a full disk).
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rapidscore.cli import main
from rapidscore.common.file_run import command_run, note_model
from rapidscore.common.output_checks import OutputError
from rapidscore.common.outputs import open_output, output_path


def _host() -> str:
    # how the output layer names this host in a temporary file's name
    return "".join(c if c.isalnum() else "_" for c in os.uname().nodename)


@pytest.fixture
def model_copy(tiny_model_path, tmp_path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path("bert"), model)
    return model


@pytest.fixture
def implicit_model(model_copy, monkeypatch) -> Iterator[Path]:
    """``model_copy`` as the embedded default (loaded without -m), with a fresh encoder cache: a
    tiny model's copy, so that nothing is written into site-packages if a guard fails."""
    from rapidscore.encoder import clear_cache, model_source

    monkeypatch.setattr(model_source, "embedded_model_dir", lambda: model_copy)
    clear_cache()
    yield model_copy
    clear_cache()


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("a cat sat on the mat\nthe dog ran home\nbirds fly high\nfish swim deep\n", encoding="utf-8")
    return path


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unexpected" not in err, err
    return err


def _nrr(folder: Path) -> list[str]:
    generated, references = folder / "generated.txt", folder / "references.txt"
    generated.write_text("a cat sat\nthe dog ran\n", encoding="utf-8")
    references.write_text("a cat sits\nbirds fly\n", encoding="utf-8")
    return ["nrr", "--generated", str(generated), "--references", str(references), "-q"]


def _baseline(model: Path, corpus: Path, out: Path | str) -> list[str]:
    return ["bertscore", "-m", str(model), "--make-baseline", str(corpus), "--out", str(out), "--pairs", "20", "-q"]


# issue 46 item 4: the reproducer (`--out model/vocab.txt` made the model's tokenizer a CSV)
def test_an_output_on_a_model_file_is_refused(model_copy, corpus, capsys) -> None:
    tokenizer = model_copy / "tokenizer.json"
    before = tokenizer.read_bytes()
    assert main(_baseline(model_copy, corpus, tokenizer)) == 2
    err = _error_line(capsys)
    assert f"--out {tokenizer}" in err and f"model file {tokenizer}" in err and f"-m {model_copy}" in err, err
    assert tokenizer.read_bytes() == before
    assert [p.name for p in model_copy.iterdir() if p.name.startswith(".")] == []  # no temporary either


# issue 46 item 4: by a symlink outside the model
def test_an_output_linked_to_a_model_file_is_refused(model_copy, corpus, tmp_path, capsys) -> None:
    config = model_copy / "config.json"
    before = config.read_bytes()
    link = tmp_path / "baseline.csv"
    link.symlink_to(config)
    assert main(_baseline(model_copy, corpus, link)) == 2
    err = _error_line(capsys)
    assert f"--out {link}" in err and str(config) in err and "-m" in err, err
    assert config.read_bytes() == before and link.is_symlink()


# issue 46 item 4: a new file inside the model directory is refused too (the model is read whole)
def test_a_new_file_inside_a_model_directory_is_refused(model_copy, corpus, capsys) -> None:
    out = model_copy / "baseline.csv"
    assert main(_baseline(model_copy, corpus, out)) == 2
    err = _error_line(capsys)
    assert f"--out {out}" in err and "inside the model directory" in err and str(model_copy) in err, err
    assert not out.exists()


# issue 46 item 4: the embedded default, loaded without -m (its directory is a tiny model's copy
# here, so that nothing is written into site-packages if the guard fails)
@pytest.mark.slow  # loads and exports a tiny model
def test_an_output_inside_a_model_loaded_implicitly_is_refused(implicit_model, tmp_path, capsys) -> None:
    model_copy = implicit_model
    tokenizer = model_copy / "tokenizer.json"
    before = tokenizer.read_bytes()
    args = _nrr(tmp_path)
    assert main([*args, "--plot", str(tokenizer)]) == 2
    err = _error_line(capsys)
    assert f"--plot {tokenizer}" in err and f"model file {tokenizer}" in err and str(model_copy) in err, err
    assert tokenizer.read_bytes() == before
    assert main([*args, "--plot", str(model_copy / "nrr.png")]) == 2
    assert "inside the model directory" in _error_line(capsys)
    assert not (model_copy / "nrr.png").exists()


# issue 46 item 4: a streamed output inside a model loaded implicitly fails the run when the model
# loads: the model's file is kept, and no partial rows or state are left in its directory
@pytest.mark.slow  # loads and exports a tiny model
def test_a_stream_into_a_model_loaded_implicitly_is_refused(implicit_model, tmp_path, capsys) -> None:
    import json

    model_copy = implicit_model
    rows = tmp_path / "answers.jsonl"
    rows.write_text(json.dumps({"generated": "a cat sat", "reference": "the cat sat"}) + "\n", encoding="utf-8")
    tokenizer = model_copy / "tokenizer.json"
    before = sorted((p.name, p.read_bytes()) for p in model_copy.iterdir())
    assert main(["nrr", "--input", str(rows), "--output", str(tokenizer), "-q"]) == 2
    err = _error_line(capsys)
    assert f"--output {tokenizer}" in err and f"model file {tokenizer}" in err, err
    assert sorted((p.name, p.read_bytes()) for p in model_copy.iterdir()) == before


# issue 46 item 4: an output opened before the model loaded is refused before it replaces its target
def test_an_output_opened_before_the_model_loaded_is_not_committed(model_copy) -> None:
    target = model_copy / "tokenizer.json"
    before = target.read_bytes()
    with pytest.raises(OutputError, match="model file"), command_run([], argparse.Namespace()):
        with open_output(target) as handle:
            handle.write("not a tokenizer")
        note_model(model_copy, lambda: "digest")  # the model loads after the output was written
    assert target.read_bytes() == before
    assert [p.name for p in model_copy.iterdir() if p.name.startswith(".")] == []


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)  # that process has exited


# issue 46 item 9: a writer killed with -9 leaves its temporary; the next writer of the target removes it
def test_a_killed_writers_temporary_is_removed_by_the_next_run(tmp_path) -> None:
    target = tmp_path / "idf.json"
    code = ("import os, sys\nfrom rapidscore.common.outputs import open_output\n"
            "with open_output(sys.argv[1]) as handle:\n    handle.write('partial')\n    handle.flush()\n"
            "    os.kill(os.getpid(), 9)\n")
    killed = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".idf.json.")]
    assert len(left) == 1 and not target.exists()
    with open_output(target) as handle:
        handle.write("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idf.json"]
    assert target.read_text(encoding="utf-8") == "{}"


# issue 46 item 9: a stale temporary of a dead process is removed by the next command that writes the
# target; those of a running process, another host's and another target's are kept
@pytest.mark.slow  # loads and exports a tiny model
def test_stale_temporaries_of_dead_processes_only_are_removed(model_copy, corpus, tmp_path) -> None:
    out = tmp_path / "base.csv"
    dead = tmp_path / f".base.csv.{_host()}~{_dead_pid()}.k1ll3d_x.tmp.csv"
    running = tmp_path / f".base.csv.{_host()}~{os.getpid()}.wr1t1ng_.tmp.csv"
    other_host = tmp_path / f".base.csv.{_host()}x~1.elsewh3r.tmp.csv"
    other_target = tmp_path / f".base.csv.old.{_host()}~{_dead_pid()}.n0tth1s_.tmp.csv"
    for path in (dead, running, other_host, other_target):
        path.write_text("partial", encoding="utf-8")
    assert main(_baseline(model_copy, corpus, out)) == 0  # beside the model: written
    assert out.read_text(encoding="utf-8").startswith("LAYER,P,R,F") and not dead.exists()
    assert running.exists() and other_host.exists() and other_target.exists()


# issue 46 item 9: a run that fails after opening its outputs leaves no temporary behind
def test_a_failed_run_leaves_no_temporary(tmp_path) -> None:
    target = tmp_path / "plot.png"
    with pytest.raises(RuntimeError), command_run([], argparse.Namespace()):
        with output_path(target) as tmp:
            Path(tmp).write_bytes(b"png")
        raise RuntimeError("the run fails after the plot")
    assert list(tmp_path.iterdir()) == []


def _dev_full() -> str:
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("/dev/full is not a character device on this machine")
    return "/dev/full"


# issue 46 item 10: `--plot-f1 /dev/full` said "[Errno 28] No space left on device"
@pytest.mark.slow  # loads and exports a tiny model
def test_plot_f1_on_a_full_device_names_it(tiny_bert, capsys) -> None:
    full = _dev_full()
    assert main(["bertscore", "-m", tiny_bert, "-c", "a cat sat", "-r", "a cat sits", "-q", "--plot-f1", full]) == 2
    err = _error_line(capsys)
    assert f"{full}: No space left on device" in err and "Errno" not in err, err


# issue 46 item 10: `nrr --plot /dev/full`
@pytest.mark.slow  # loads and exports a tiny model
def test_nrr_plot_on_a_full_device_names_it(tiny_bert, tmp_path, capsys) -> None:
    full = _dev_full()
    args = [*_nrr(tmp_path), "--model", tiny_bert]
    assert main([*args, "--plot", full]) == 2
    err = _error_line(capsys)
    assert f"{full}: No space left on device" in err and "Errno" not in err, err


# issue 46 item 10: a full disk while matplotlib writes a regular file names the file, not the temporary
@pytest.mark.slow  # loads and exports a tiny model
def test_a_full_disk_during_a_plot_names_the_plot(tiny_bert, tmp_path, monkeypatch, capsys) -> None:
    from matplotlib.figure import Figure

    def full_disk(self, fname, **kwargs):
        with open(fname, "wb") as handle:
            handle.write(b"\x89PNG")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    out = tmp_path / "f1.png"
    out.write_bytes(b"an earlier plot")
    assert main(["bertscore", "-m", tiny_bert, "-c", "a cat sat", "-r", "a cat sits", "-q", "--plot-f1",
                 str(out)]) == 2
    assert _error_line(capsys).endswith(f"error: {out}: No space left on device")
    assert out.read_bytes() == b"an earlier plot" and sorted(p.name for p in tmp_path.iterdir()) == ["f1.png"]


# issue 46 item 10: the shared layer names the target whatever the writer reported
@pytest.mark.parametrize("reported", ["nothing", "the temporary"])
def test_output_path_names_the_target_of_a_failed_write(tmp_path, reported) -> None:
    target = tmp_path / "table.parquet"
    with pytest.raises(OSError) as info, output_path(target) as tmp:
        name = None if reported == "nothing" else tmp
        raise OSError(errno.ENOSPC, "No space left on device", name)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


# issue 46 item 9: `rapidscore export --name` killed while copying the model's files left its staging
def test_a_killed_weightless_copy_is_removed_by_the_next_one(tiny_bert, tmp_path) -> None:
    from rapidscore.encoder.model_source import save_weightless_copy

    models = tmp_path / "models"
    models.mkdir()
    killed = models / f".org--tiny-{_host()}~{_dead_pid()}-k1ll3d_x"
    running = models / f".org--tiny-{_host()}~{os.getpid()}-c0py1ng_"
    for path in (killed, running):
        path.mkdir()
        (path / "config.json").write_text("{}", encoding="utf-8")
        os.utime(path, (os.path.getmtime(path) - 120,) * 2)  # past the minute a staging is given to start
    copy = save_weightless_copy(Path(tiny_bert), "org/tiny", tmp_path)
    assert (copy / "config.json").is_file() and not killed.exists() and running.exists()
    assert sorted(p.name for p in models.iterdir()) == sorted([copy.name, running.name])


def _model_options() -> dict[str, str]:
    """command -> the option its parser marks as naming a model (common/outputs.py model_option)."""
    from rapidscore.common.file_options import file_options

    from .test_output_layer import _parsers

    found = {}
    for name, parser in _parsers().items():
        options = file_options(parser._actions, "model")
        if options:
            found[name] = options[0][0]
    return found


def test_the_commands_that_take_a_model_mark_it() -> None:
    marked = _model_options()
    for name in ("bertscore", "nrr", "abstention", "rgb", "report", "ner", "serve"):
        assert name in marked, f"rapidscore {name} takes a model: mark the option with model_option"


# issue 46 item 4: every output option of every command with a model option, inside that model
@pytest.mark.parametrize("name", ["bertscore", "nrr", "abstention", "ner", "report"])
def test_every_output_inside_a_named_model_is_refused(name, model_copy, tmp_path, tiny_model_path, capsys) -> None:
    from .test_output_layer import _argv, _examples, _snapshot

    option = _model_options()[name]
    before = _snapshot(model_copy)
    for base, outputs in _examples(name, tmp_path, str(tiny_model_path("bert"))):
        given = next((k for k, part in enumerate(base) if part in ("-m", "--model", option)), None)
        base = ([*base[:given + 1], str(model_copy), *base[given + 2:]] if given is not None
                else [*base, option, str(model_copy)])
        for output in outputs:
            directory = output in ("--plot-dir", "--cache")
            places = [model_copy / "plots"] if directory else [model_copy / "tokenizer.json", model_copy / "new"]
            for inside in places:
                status = main(_argv(name, base, {**outputs, output: inside}))
                err = capsys.readouterr().err
                assert status == 2 and f"{output} {inside}" in err and str(model_copy) in err, (name, output, err)
                assert "model" in err and "unexpected" not in err, err
    assert _snapshot(model_copy) == before

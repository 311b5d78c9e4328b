"""A damaged ONNX cache entry is found when it is loaded, and exported again (issue 29 item 13).

Each entry's meta.json records the size and sha256 of every file the export wrote; a file that
no longer matches (truncated, emptied, garbled) is reported with a RapidscoreWarning and the entry
is exported again. Where exporting is impossible (no torch), the error names the file and says
what to do. Also the export's note on the "rapidscore" logger (issue 29 item 17): said when an
export starts and ends, never when the entry is loaded from the cache.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest

from rapidscore.encoder import Encoder, clear_cache
from rapidscore.errors import RapidscoreWarning

TEXTS = ["a damaged cache entry", "is exported again"]


@pytest.fixture
def exported(tiny_model_path, tmp_path) -> tuple:
    """A fresh cache with one tiny BERT entry, and that encoder's embeddings of TEXTS."""
    model = tiny_model_path("bert")
    encoder = Encoder(str(model), layer=1, cache_dir=tmp_path)
    assert encoder.exported
    expected = encoder.token_embeddings(TEXTS)
    clear_cache()  # the next Encoder loads from disk, not from this process's model cache
    return model, tmp_path, encoder.cache_entry, expected


def _damage(path, how: str) -> None:
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbled":
        data = bytearray(path.read_bytes())
        data[len(data) // 3: len(data) // 3 + 8] = b"\x00garbled"  # same size, other bytes
        path.write_bytes(bytes(data))
    else:
        raise AssertionError(how)


# issue 29 item 13
@pytest.mark.parametrize("name, how", [("model.onnx", "truncated"), ("model.onnx", "empty"),
                                       ("model.onnx", "garbled"), ("tokenizer.json", "garbled"),
                                       ("tokenizer.json", "empty"), ("tokenizer_spec.json", "truncated")])
def test_damaged_entry_is_exported_again_with_a_warning(exported, name, how) -> None:
    model, cache, entry, expected = exported
    _damage(entry / name, how)
    with pytest.warns(RapidscoreWarning, match=rf"{name}.*exporting it again"):
        again = Encoder(str(model), layer=1, cache_dir=cache)
    assert again.exported and again.cache_entry == entry
    got = again.token_embeddings(TEXTS)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [entry.name]  # the damaged copy is gone
    clear_cache()
    Encoder(str(model), layer=1, cache_dir=cache)  # the new entry verifies: no warning (warnings are errors)


# issue 29 item 13
def test_missing_file_and_garbled_meta_are_damage_too(exported) -> None:
    model, cache, entry, _ = exported
    (entry / "tokenizer_spec.json").unlink()
    with pytest.warns(RapidscoreWarning, match="tokenizer_spec.json.*missing"):
        Encoder(str(model), layer=1, cache_dir=cache)
    clear_cache()
    (entry / "meta.json").write_text("{not json", encoding="utf-8")
    with pytest.warns(RapidscoreWarning, match="meta.json"):
        assert Encoder(str(model), layer=1, cache_dir=cache).exported


# issue 29 item 13
def test_meta_records_size_and_hash_of_every_file(exported) -> None:
    import hashlib

    _, _, entry, _ = exported
    files = json.loads((entry / "meta.json").read_text(encoding="utf-8"))["files"]
    on_disk = {p.name for p in entry.iterdir() if p.is_file() and p.name != "meta.json"}
    assert set(files) == on_disk >= {"model.onnx", "tokenizer.json", "tokenizer_spec.json"}
    for name, record in files.items():
        data = (entry / name).read_bytes()
        assert record == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# issue 29 item 13
def test_damaged_entry_without_torch_is_a_clear_error(exported, monkeypatch) -> None:
    from rapidscore.encoder.onnx_export import DamagedCacheError

    model, cache, entry, _ = exported
    _damage(entry / "model.onnx", "truncated")
    monkeypatch.setitem(sys.modules, "torch", None)  # what find_spec reports where torch is not installed
    with pytest.raises(DamagedCacheError) as info:
        Encoder(str(model), layer=1, cache_dir=cache)
    message = str(info.value)
    assert str(entry / "model.onnx") in message and "size" in message
    assert "rapidscore export" in message and "rapidscore[export]" in message
    assert isinstance(info.value, ValueError)  # a CLI prints it as one line, exit 2


# issue 29 item 13
@pytest.mark.slow
def test_cli_on_a_damaged_entry_without_torch_is_one_line(exported, tmp_path) -> None:
    model, cache, entry, _ = exported
    (entry / "model.onnx").write_bytes(b"")
    # torch hidden from the child: None in sys.modules fails its import, and find_spec says absent
    code = ("import sys\n"
            "sys.modules['torch'] = None\n"
            "from rapidscore.cli import main\n"
            f"sys.exit(main(['bertscore', '-m', {str(model)!r}, '-l', '1', '-c', 'a cat', '-r', 'a cat', '-q']))\n")
    import os

    # entries live in <RAPIDSCORE_CACHE>/onnx: make the fixture's cache that folder
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "onnx").symlink_to(cache)
    env = dict(os.environ, RAPIDSCORE_CACHE=str(tmp_path / "root"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.onnx" in lines[0] and "Traceback" not in result.stderr, result.stderr


# issue 29 item 17 (the first export said nothing for ~12 s)
def test_export_is_announced_on_the_logger_and_loading_is_not(tiny_model_path, tmp_path, caplog) -> None:
    model = tiny_model_path("bert")
    with caplog.at_level(logging.INFO, logger="rapidscore"):
        Encoder(str(model), layer=2, cache_dir=tmp_path)
    notes = [r.getMessage() for r in caplog.records if r.name.startswith("rapidscore")]
    assert any("exporting" in n and str(model) in n and "layer 2" in n for n in notes), notes
    assert any("exported" in n and " s" in n for n in notes), notes
    caplog.clear()
    clear_cache()
    with caplog.at_level(logging.INFO, logger="rapidscore"):
        Encoder(str(model), layer=2, cache_dir=tmp_path)
    assert [r for r in caplog.records if r.name.startswith("rapidscore")] == []


# issue 29 item 17
def test_library_export_note_stays_off_stderr_by_default(tiny_model_path, tmp_path) -> None:
    code = (f"from rapidscore.encoder import Encoder\n"
            f"Encoder({str(tiny_model_path('bert'))!r}, layer=2, cache_dir={str(tmp_path)!r})\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "exporting" not in result.stderr


# issue 29 item 17
@pytest.mark.parametrize("quiet", [False, True])
def test_cli_says_when_it_exports_unless_quiet(tiny_model_path, tmp_path, monkeypatch, capsys, quiet) -> None:
    from rapidscore.cli import main

    monkeypatch.setenv("RAPIDSCORE_CACHE", str(tmp_path))
    clear_cache()
    argv = ["bertscore", "-m", str(tiny_model_path("bert")), "-l", "3", "-c", "a cat", "-r", "a cat"]
    assert main(argv + (["-q"] if quiet else [])) == 0
    err = capsys.readouterr().err
    assert ("exporting" in err and "layer 3" in err) != quiet, err
    clear_cache()
    assert main(argv) == 0
    assert "exporting" not in capsys.readouterr().err  # loaded from the cache: nothing to say
    assert logging.getLogger("rapidscore").handlers == []  # the command's stderr handler is gone

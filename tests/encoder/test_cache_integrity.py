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
    from rapidscore.encoder.export.onnx_export import DamagedCacheError

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


# ---------------------------------------------------------------- every file recorded (issue 36 row 9)

def _meta(entry) -> dict:
    return json.loads((entry / "meta.json").read_text(encoding="utf-8"))


# issue 36 row 9 (the reproducer: max_length edited to 8 loaded, F1 0.692 -> 0.798)
def test_an_edited_tokenizer_spec_is_damage(exported) -> None:
    model, cache, entry, expected = exported
    spec_file = entry / "tokenizer_spec.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    spec["max_length"] = 8
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.warns(RapidscoreWarning, match=r"tokenizer_spec.json.*exporting it again"):
        again = Encoder(str(model), layer=1, cache_dir=cache)
    assert again.max_length == json.loads(spec_file.read_text(encoding="utf-8"))["max_length"] > 8
    for a, b in zip(again.token_embeddings(TEXTS), expected):
        np.testing.assert_array_equal(a, b)


# issue 36 row 9: a file of the entry that meta.json does not list is damage too
@pytest.mark.parametrize("added", ["notes.txt", "sub/model.onnx.data"])
def test_a_file_meta_does_not_record_is_damage(exported, added) -> None:
    model, cache, entry, expected = exported
    (entry / added).parent.mkdir(exist_ok=True)
    (entry / added).write_text("added after the export", encoding="utf-8")
    with pytest.warns(RapidscoreWarning, match=rf"{added}.*not recorded.*exporting it again"):
        again = Encoder(str(model), layer=1, cache_dir=cache)
    assert again.exported and not (entry / added).exists()
    for a, b in zip(again.token_embeddings(TEXTS), expected):
        np.testing.assert_array_equal(a, b)


# issue 36 row 9: an entry of an older exporter, whose meta.json lacks a file's record, is not trusted
@pytest.mark.parametrize("name", ["tokenizer_spec.json", "tokenizer.json"])
def test_an_entry_whose_meta_lacks_a_record_is_exported_again(exported, name) -> None:
    model, cache, entry, _ = exported
    meta = _meta(entry)
    del meta["files"][name]
    (entry / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.warns(RapidscoreWarning, match=rf"{name}.*not recorded.*exporting it again"):
        assert Encoder(str(model), layer=1, cache_dir=cache).exported
    assert name in _meta(entry)["files"]


# issue 36 row 9: the same rule without torch: a clear DamagedCacheError naming the file
def test_an_unrecorded_file_without_torch_is_a_clear_error(exported, monkeypatch) -> None:
    from rapidscore.encoder.export.onnx_export import DamagedCacheError

    model, cache, entry, _ = exported
    meta = _meta(entry)
    del meta["files"]["tokenizer_spec.json"]
    (entry / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(DamagedCacheError, match=r"tokenizer_spec.json is not recorded"):
        Encoder(str(model), layer=1, cache_dir=cache)


@pytest.fixture
def stamp_at_once(monkeypatch) -> None:
    """Entries are stamped as verified however young their files (the default waits a few
    seconds after the last write, so that a write in the same clock tick cannot go unseen)."""
    from rapidscore.encoder.export import disk_cache

    monkeypatch.setattr(disk_cache, "STAMP_MIN_AGE_SECONDS", 0.0)


def _count_hashing(monkeypatch) -> list:
    from rapidscore.encoder.export import disk_cache

    hashed: list = []
    real = disk_cache.file_record

    def counting(path):
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(disk_cache, "file_record", counting)
    return hashed


# issue 36 row 9: loading stays fast: a verified entry is hashed again only when a file changed
def test_a_verified_entry_is_not_hashed_again_until_a_file_changes(exported, stamp_at_once, monkeypatch) -> None:
    import os

    from rapidscore.encoder.export.disk_cache import verified_stamp

    model, cache, entry, _ = exported
    hashed = _count_hashing(monkeypatch)
    Encoder(str(model), layer=1, cache_dir=cache)
    assert sorted(hashed) == sorted(_meta(entry)["files"])  # the first load verifies every file
    assert verified_stamp(entry).is_file() and verified_stamp(entry).parent == entry.parent  # not in the entry
    hashed.clear()
    clear_cache()
    Encoder(str(model), layer=1, cache_dir=cache)
    assert hashed == []
    os.utime(entry / "tokenizer.json")  # touched, same bytes: hashed again, and still sound
    clear_cache()
    Encoder(str(model), layer=1, cache_dir=cache)
    assert sorted(hashed) == sorted(_meta(entry)["files"])


# issue 36 row 9: the stamp trusts no file whose bytes changed, even with its size and mtime put back
def test_a_same_size_edit_with_its_mtime_put_back_is_found_after_a_verified_load(exported, stamp_at_once) -> None:
    import os

    model, cache, entry, expected = exported
    Encoder(str(model), layer=1, cache_dir=cache)  # verified and stamped
    clear_cache()
    spec_file = entry / "tokenizer_spec.json"
    before = spec_file.stat()
    text = spec_file.read_text(encoding="utf-8")
    edited = text.replace(f'"max_length": {json.loads(text)["max_length"]}', '"max_length": 100')
    assert edited != text and len(edited) == len(text)
    spec_file.write_text(edited, encoding="utf-8")
    os.utime(spec_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.warns(RapidscoreWarning, match=r"tokenizer_spec.json.*sha256.*exporting it again"):
        again = Encoder(str(model), layer=1, cache_dir=cache)
    for a, b in zip(again.token_embeddings(TEXTS), expected):
        np.testing.assert_array_equal(a, b)


# issue 36 row 9: files written moments ago are not stamped (a write in the same clock tick as the
# stamp would keep its times); the entry is verified in full until they are older
def test_a_fresh_entry_is_verified_in_full_and_not_stamped(exported, monkeypatch) -> None:
    from rapidscore.encoder.export.disk_cache import verified_stamp

    model, cache, entry, _ = exported
    hashed = _count_hashing(monkeypatch)
    Encoder(str(model), layer=1, cache_dir=cache)
    assert hashed and not verified_stamp(entry).exists()


# issue 36 row 9: a rebuilt entry drops the stamp of the one it replaced
def test_rebuilding_an_entry_removes_its_stamp(exported, stamp_at_once) -> None:
    from rapidscore.encoder.export.disk_cache import verified_stamp

    model, cache, entry, _ = exported
    Encoder(str(model), layer=1, cache_dir=cache)
    assert verified_stamp(entry).is_file()
    clear_cache()
    _damage(entry / "model.onnx", "truncated")
    with pytest.warns(RapidscoreWarning, match="exporting it again"):
        Encoder(str(model), layer=1, cache_dir=cache)
    assert not verified_stamp(entry).exists()


# issue 36 row 9: the int8 graph's entry follows the same rule
@pytest.mark.slow
def test_a_file_the_int8_meta_does_not_record_is_damage(tiny_model_path, tmp_path) -> None:
    from rapidscore.encoder.export.disk_cache import entry_damage
    from rapidscore.encoder.export.int8 import cached_int8

    encoder = Encoder(str(tiny_model_path("bert")), layer=1, precision="int8", cache_dir=tmp_path)
    int8_entry, built = cached_int8(encoder.cache_entry, encoder.tokenizer, encoder.spec.pad_id)
    assert not built and set(_meta(int8_entry)["files"]) == {"model.onnx"}
    (int8_entry / "calibration.onnx").write_bytes(b"left behind")
    assert "calibration.onnx is not recorded" in (entry_damage(int8_entry) or "")
    rebuilt, built = cached_int8(encoder.cache_entry, encoder.tokenizer, encoder.spec.pad_id)
    assert (rebuilt, built) == (int8_entry, True) and entry_damage(int8_entry) is None

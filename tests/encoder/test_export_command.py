"""``rapidscore export`` (issue 29 item 18): ONNX entries and the model's files without weights
exported into a cache on a build machine, which a runtime then reads alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rapidscore.cli import main
from rapidscore.encoder import Encoder, clear_cache
from rapidscore.encoder.model_source import WEIGHTLESS_RECORD, resolve_model
from rapidscore.errors import ModelNotFoundError

TEXTS = ["an exported cache", "scores alone"]


def _export(capsys, *argv: str) -> dict:
    assert main(["export", *argv, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


# issue 29 item 18
def test_export_writes_padded_and_unpadded_entries_and_a_weightless_copy(tiny_model_path, tmp_path, capsys) -> None:
    model = tiny_model_path("bert")
    result = _export(capsys, str(model), "--layer", "2", "--layer", "1", "--cache", str(tmp_path),
                     "--name", "tiny/bert")
    assert [(e["layer"], e["unpadded"], e["exported"]) for e in result["entries"]] == [
        (2, False, True), (2, True, True), (1, False, True), (1, True, True)]
    for item in result["entries"]:
        assert item["entry"].startswith(str(tmp_path / "onnx"))
    copy = tmp_path / "models" / "tiny--bert"
    assert result["weightless_copy"] == str(copy)
    assert (copy / WEIGHTLESS_RECORD).is_file() and (copy / "config.json").is_file()
    assert not list(copy.glob("*.safetensors")) and not list(copy.glob("*.bin"))
    # a second run finds everything in place
    again = _export(capsys, str(model), "--layer", "2", "--cache", str(tmp_path), "--name", "tiny/bert")
    assert [e["exported"] for e in again["entries"]] == [False, False]


# issue 29 item 18
def test_the_cache_alone_resolves_the_name_and_gives_the_same_vectors(tiny_model_path, tmp_path, capsys,
                                                                      monkeypatch) -> None:
    model = tiny_model_path("bert")
    _export(capsys, str(model), "--layer", "2", "--cache", str(tmp_path), "--name", "tiny/bert")
    expected = Encoder(str(model), layer=2).token_embeddings(TEXTS)
    clear_cache()
    monkeypatch.setenv("RAPIDSCORE_CACHE", str(tmp_path))
    assert resolve_model("tiny/bert") == tmp_path / "models" / "tiny--bert"
    from_cache = Encoder("tiny/bert", layer=2)
    assert not from_cache.exported  # found the exported entry: the copy's fingerprint is the model's
    for got, want in zip(from_cache.token_embeddings(TEXTS), expected):
        np.testing.assert_array_equal(got, want)
    # what was not exported cannot be made without the weights: the error says what to run
    with pytest.raises(ModelNotFoundError, match=r"without its weights.*rapidscore export tiny/bert --layer 3"):
        Encoder("tiny/bert", layer=3)


# issue 29 item 18
def test_default_layers_are_bertscore_s_and_the_last(minilm_path, tmp_path, capsys, monkeypatch) -> None:
    from rapidscore.encoder.export import onnx_export

    calls = []

    def fake_export(model_dir, layer, precision, prefix, *, cache_dir, unpadded, use_shipped):
        assert not use_shipped  # written into the cache asked for, even where a package ships the graph
        calls.append((layer, unpadded))
        return cache_dir / f"{layer}-{unpadded}", True

    monkeypatch.setattr(onnx_export, "cached_export", fake_export)
    result = _export(capsys, "all-MiniLM-L6-v2", "--cache", str(tmp_path))
    assert calls == [(6, False), (6, True)]  # not in bert-score's table of tuned layers: the last layer
    # the short name is the hub id's: one weightless copy under the hub id
    assert result["weightless_copy"] == str(tmp_path / "models" / "sentence-transformers--all-MiniLM-L6-v2")
    assert (tmp_path / "models" / "sentence-transformers--all-MiniLM-L6-v2" / "1_Pooling").is_dir()
    calls.clear()
    assert _export(capsys, str(minilm_path), "--cache", str(tmp_path))["weightless_copy"] is None  # no --name


# issue 29 item 18
@pytest.mark.parametrize("argv, message", [
    (["--layer", "9"], r"--layer must be in \[0, 4\]"),
    (["--name", "not a name!"], "hub-id-like name"),
])
def test_export_refusals_are_one_line(tiny_model_path, tmp_path, capsys, argv, message) -> None:
    import re

    code = main(["export", str(tiny_model_path("bert")), "--cache", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and re.search(message, err[0]), err


# issue 29 item 18
def test_export_help_loads_no_encoder() -> None:
    import subprocess
    import sys

    code = ("import json, runpy, sys\n"
            "sys.argv = ['rapidscore', 'export', '--help']\n"
            "try:\n    runpy.run_module('rapidscore.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(json.dumps([m for m in ('numpy', 'rapidscore.encoder', 'torch') if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "rapidscore export" in out.stdout and "--layer" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# issue 29 items 13 and 18
def test_a_damaged_entry_of_a_weightless_copy_says_what_to_export(tiny_model_path, tmp_path, capsys,
                                                                  monkeypatch) -> None:
    from rapidscore.encoder.export.onnx_export import DamagedCacheError

    result = _export(capsys, str(tiny_model_path("bert")), "--layer", "2", "--cache", str(tmp_path),
                     "--name", "tiny/bert")
    padded = Path(result["entries"][0]["entry"])
    (padded / "model.onnx").write_bytes(b"")
    clear_cache()
    monkeypatch.setenv("RAPIDSCORE_CACHE", str(tmp_path))
    with pytest.raises(DamagedCacheError, match=r"model.onnx has 0 bytes.*rapidscore export tiny/bert --layer 2"):
        Encoder("tiny/bert", layer=2)  # torch is here, but the weights are not

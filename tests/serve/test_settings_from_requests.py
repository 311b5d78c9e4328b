"""A request's options become a metric's settings from the declarations alone (issue 47): a
request option left out takes the server setting it names (``Option.server``); one that names a
server setting's values (``Option.among``) is checked against what the server loaded (a served
model by any spelling, the default when left out; a file by its name, none when left out);
the table of engines is keyed by the resulting ``Settings``. No model is loaded: the metric
here is a toy that records its settings."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from rapidscore.common.metric import Column, Metric, RequestOption, ServerSetting, Settings


class Pick(Metric):
    name = "pick-toy"
    summary = "a toy metric that names a model, a layer and a file"
    inputs = (Column("text", "text", "any text"),)
    outputs = ("echo",)
    options = (
        RequestOption("model", str, None, "a served model", among="model"),
        RequestOption("num_layers", int, None, "a served layer", among="layer"),
        RequestOption("table", str, None, "a table file the server loaded", among="pick_table"),
        RequestOption("mode", str, None, "how (default: the server's pick_mode)", server="pick_mode"),
        ServerSetting("pick_table", str, None, "a table file (repeatable)", repeated=True, files=True),
        ServerSetting("pick_mode", str, "plain", "the mode of requests that name none"),
    )

    def build(self, **settings) -> dict:
        return dict(settings)

    def score(self, engine, columns, names=None) -> dict:
        return {"echo": [f"{text}:{engine['mode']}" for text in columns["text"]]}


@pytest.fixture
def pick() -> Iterator[Metric]:
    from rapidscore.metrics import register, unregister

    metric = register(Pick())
    yield metric
    unregister(metric.name)


def _service(tmp_path, **settings):
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    table = tmp_path / "wiki.json"
    table.write_text("{}")
    config = ServeConfig(metrics=("pick-toy",), model=("sentence-transformers/all-MiniLM-L6-v2", "other"),
                         layer=(2, 1), pick_table=(str(table),), warmup=False, **settings)
    return ScoringService(config), str(table)


def test_left_out_options_take_the_servers_values(pick, tmp_path) -> None:
    service, _ = _service(tmp_path, pick_mode="loud")
    settings = service.settings(pick, {})
    assert settings == Settings(model="sentence-transformers/all-MiniLM-L6-v2", num_layers=2, table=None,
                                mode="loud")


def test_named_values_are_checked_against_what_the_server_loaded(pick, tmp_path) -> None:
    service, table = _service(tmp_path)
    # the embedded model under another of its names is the served one: one engine
    assert service.settings(pick, {"model": "all-MiniLM-L6-v2"}) == service.settings(pick, {})
    assert service.settings(pick, {"table": "wiki"})["table"] == table
    assert service.settings(pick, {"num_layers": 1, "model": "other"})["num_layers"] == 1
    for options, field, message in [
        ({"model": "bert-base-uncased"}, "model", "is not served here; the served models"),
        ({"num_layers": 7}, "num_layers", "is not a layer served for"),
        ({"table": "news"}, "table", "'news' is not a pick table this server loaded; loaded: ['wiki'] "
                                     "(rapidscore serve --pick-table)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)) as caught:
            service.settings(pick, options)
        assert caught.value.field == field


def test_the_engine_table_is_keyed_by_the_settings(pick, tmp_path) -> None:
    service, _ = _service(tmp_path)
    service.start()  # the served models and layers: 2 x 2 engines, no file table
    assert len(service._preloaded) == 4
    scorer = service.scorer(pick, model="all-MiniLM-L6-v2")
    assert scorer is service.scorer(pick)  # one engine for one setting, however it was spelled
    assert (pick.name, service.settings(pick, {})) in service._scorers
    assert scorer.score(["a"]) == {"echo": ["a:plain"]}
    service.close()


def test_two_files_of_one_name_are_refused(pick, tmp_path) -> None:
    from rapidscore.serve.config import ServeConfig

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(ValueError, match="pick_table: two files of one name"):
        ServeConfig(metrics=("pick-toy",), pick_table=(str(tmp_path / "a" / "x.json"), str(tmp_path / "b" / "x.json")))

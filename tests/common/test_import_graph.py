"""rapidscore's modules import each other without a cycle of any kind, and down the layers
(common and kernels below the encoder, the encoder below the metrics, the CLI above).

The graph (``import_graph_reader.py`` beside this file) counts imports inside functions, calls of
``import_module`` (constant names, names from the module's tables, f-strings), and the tables a
module ``__getattr__`` imports from (``lazy_exports``, the root package's ``_LAZY_ATTRIBUTES``);
imports under ``if TYPE_CHECKING:`` are left out (they never run).
"""

from __future__ import annotations


def test_graph_is_read_from_the_sources(graph_reader) -> None:
    graph = graph_reader.import_graph()
    assert "rapidscore.kernels.matching" in graph["rapidscore.bertscore.scorer"] or \
        "rapidscore.encoder.store" in graph["rapidscore.bertscore.scorer"]
    assert "rapidscore.threads" in graph["rapidscore.kernels.matching"]


def test_graph_reads_import_module_and_module_getattr(graph_reader) -> None:
    graph = graph_reader.import_graph()
    # f"{package}.streams" in streaming.__getattr__, the packages from metrics.BUILTIN
    assert "rapidscore.nrr.streams" in graph["rapidscore.streaming"]
    assert "rapidscore.nrr.metric" in graph["rapidscore.metrics"]  # import_module(BUILTIN's value)
    assert "rapidscore.nrr.scoring" in graph["rapidscore.nrr"]  # lazy_exports(__name__, _EXPORTS)
    assert "rapidscore.streaming" in graph["rapidscore"]  # the root's _LAZY_ATTRIBUTES
    assert "rapidscore.bert_score" in graph["rapidscore"]  # f"rapidscore.{name}", name in _LAZY_SUBMODULES
    assert "rapidscore.serve.cli" in graph["rapidscore.cli"]  # import_module(module_name) over TOOL_COMMANDS


def test_graph_reader_finds_a_cycle_hidden_behind_getattr(graph_reader, tmp_path) -> None:
    source = tmp_path / "hook.py"
    source.write_text("from importlib import import_module\n_TABLE = {'a': 'rapidscore.streaming'}\n"
                      "def __getattr__(name):\n    return import_module(_TABLE[name])\n"
                      "if TYPE_CHECKING:\n    import rapidscore.cli\n")
    module = graph_reader._Module("rapidscore.hook", source)
    known = {"rapidscore.streaming", "rapidscore.cli"}
    assert graph_reader._dynamic_imports(module, [], known) == {"rapidscore.streaming"}
    assert graph_reader._static_imports(module, known) == set()  # TYPE_CHECKING: left out


def test_no_import_cycle(graph_reader) -> None:
    cycle = graph_reader.find_cycle(graph_reader.import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_cycle(graph_reader) -> None:
    assert graph_reader.find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert graph_reader.find_cycle({"a": {"b"}, "b": set()}) is None


# Lower ranks never import higher ones (a module may import within its own rank).
RANKS = {
    "rapidscore._version": 0, "rapidscore._core": 0, "rapidscore.errors": 0, "rapidscore.threads": 0,
    "rapidscore.common": 0, "rapidscore.kernels": 1, "rapidscore.encoder": 1,
    "rapidscore.device": 1,  # the tensor path: the torch runner and the matching dispatcher use it
    "rapidscore.device.engine": 2,  # BERTScore's device engine: uses bertscore/finishing.py
    "rapidscore.bertscore": 2, "rapidscore.bert_score": 2, "rapidscore.nrr": 2, "rapidscore.ner": 2,
    "rapidscore.abstention": 2, "rapidscore.streaming": 2, "rapidscore.metrics": 2, "rapidscore.integrations": 3,
    "rapidscore.serve": 3, "rapidscore.cli": 3, "rapidscore.metric_cli": 3, "rapidscore.__main__": 3, "rapidscore.export_cli": 3,
    "rapidscore.report": 3,  # the HTML report: reads every metric's outputs, like the CLI
    "rapidscore.compare": 3,  # paired tests between systems: reads any metric's result files, as the report does
    "rapidscore.compare.digests": 0,  # per-item digests (standard library only): the metric commands write them
    "rapidscore.testing": 3,  # test and benchmark data generators: they may use any metric, none uses them
}
# The root package: its __init__ loads only _version and errors, but its public names resolve to
# every layer (the facade at the top); no module of the package imports it. Matched exactly.
ROOT_RANK = 4


def _rank(module: str) -> int:
    if module == "rapidscore":
        return ROOT_RANK
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in RANKS:
            return RANKS[prefix]
    raise AssertionError(f"{module} has no layer in RANKS: add it")


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_imports_point_down_the_layers(graph_reader) -> None:
    graph = graph_reader.import_graph()
    upward = [(source, target) for source, targets in graph.items() for target in targets
              if _rank(target) > _rank(source)]
    sideways = [(source, target) for source, targets in graph.items() for target in targets
                if {_area(source), _area(target)} == {"kernels", "encoder"}]
    assert not upward, f"imports up the layers: {upward}"
    assert not sideways, f"kernels and encoder import each other: {sideways}"


def test_rank_check_sees_an_upward_import() -> None:
    assert _rank("rapidscore.bertscore.scorer") > _rank("rapidscore.encoder.store")
    assert _area("rapidscore.kernels.matching") == "kernels"

"""Ray Data on a two-node ``ray.cluster_utils.Cluster`` (loopback): the distributed idf pass and
BERTScore actors spread over both nodes give the single-process scores, multi-reference and idf
included. One cluster for the module, one CPU per node."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the [ray] extra (part of [test])")
pytestmark = pytest.mark.slow  # starts a Ray cluster

from ray.cluster_utils import Cluster  # noqa: E402

from rapidscore.bertscore import BERTScore  # noqa: E402
from rapidscore.integrations.ray import document_frequencies, score_dataset  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    nodes = Cluster(initialize_head=True, connect=True,
                    head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    nodes.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    nodes.wait_for_nodes()
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def test_two_nodes_score_like_one_process(cluster, ray_model, ray_rows):
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    ds = ray.data.from_items(ray_rows, override_num_blocks=6)
    cands, refs = [r["candidate"] for r in ray_rows], [r["reference"] for r in ray_rows]
    scorer = BERTScore(ray_model, 3, idf=True)
    counts = document_frequencies(ds, model=ray_model, layer=3, batch_size=5)
    assert counts == scorer.document_frequencies(list(zip(cands, refs)))
    # two actors of one CPU each on two one-CPU nodes: one actor per node
    scored = score_dataset(ds, model=ray_model, layer=3, idf=counts, concurrency=2, num_cpus=1, num_threads=1,
                           batch_size=8, batch_format="numpy", reference_batch_size=4)
    rows = sorted(scored.take_all(), key=lambda row: int(row["id"][1:]))
    expected = scorer.score(cands, refs, reference_batch_size=4)
    for name in ("precision", "recall", "f1"):
        assert np.array_equal(np.array([row[name] for row in rows], np.float32), getattr(expected, name))

"""The serving process's memory (issue 46, the soak): one ONNX Runtime CPU arena shared by every
session, filled to the workers' largest batches before the server turns ready
(``encoder.runtime.onnx.share_cpu_arena``, ``encoder.shared.fill_working_memory``,
``serve/process_tuning.py``). The arena must not change a number, and the fill must run the
largest batch the encoder's token budget allows, as many times at once as there are workers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from rapidscore.encoder import get_encoder
from rapidscore.encoder.shared import fill_working_memory

TEXTS = ["Rob Halford sings in Judas Priest.", "He plays football in Madrid on Sundays.", "a"]

# In a child process: the arena is process-wide and cannot be taken back.
_CHILD = r"""
import json, sys
import numpy as np
from rapidscore.encoder.runtime.onnx import share_cpu_arena
share_cpu_arena(16 * 2**20)
from rapidscore.encoder import Encoder
encoder = Encoder(sys.argv[1], layer=2, backend="onnx")
config = encoder.runner.session.get_session_options().get_session_config_entry("session.use_env_allocators")
store = encoder.encode(json.loads(sys.argv[2]))
print(json.dumps({"config": config, "embeddings": np.asarray(store.embeddings).tolist()}))
"""


@pytest.mark.slow  # a child process loads onnxruntime and the tiny model
def test_sessions_in_the_shared_arena_give_the_same_numbers(tiny_bert) -> None:
    from rapidscore.encoder import Encoder

    alone = Encoder(tiny_bert, layer=2, backend="onnx").encode(TEXTS)
    child = subprocess.run([sys.executable, "-c", _CHILD, tiny_bert, json.dumps(TEXTS)], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    shared = json.loads(child.stdout.strip().splitlines()[-1])
    assert shared["config"] == "1"  # the session was made on the process's arena
    np.testing.assert_array_equal(np.asarray(shared["embeddings"], dtype=np.float32), np.asarray(alone.embeddings))


def test_the_fill_runs_the_largest_batch_once_per_worker_at_once(tiny_bert, monkeypatch) -> None:
    encoder = get_encoder(tiny_bert, layer=2, batch_tokens=512)
    embed_ids = encoder.embed_ids
    shapes: list[tuple[int, int]] = []
    lock = threading.Lock()
    both_in = threading.Barrier(2, timeout=60)

    def recording(ids, **options):
        with lock:
            shapes.append((len(ids), max(len(i) for i in ids)))
        both_in.wait()  # passes only once both workers' batches are in flight together
        return embed_ids(ids, **options)

    monkeypatch.setattr(encoder, "embed_ids", recording)
    fill_working_memory(2)
    rows = min(encoder.max_batch_size, encoder.batch_tokens // encoder.max_length)
    assert rows > 1 and encoder.max_length == 128  # the tiny model's bound: a batch of several full rows
    assert shapes == [(rows, encoder.max_length)] * 2

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


# The reserve is kept and what a batch needed past it is given back when the batch ends (the
# arena's growth regions, shrunk by the run that leaves them empty).
_GROWTH_CHILD = r"""
import ctypes, json, sys
import numpy as np
from rapidscore.encoder.runtime.onnx import share_cpu_arena
share_cpu_arena(int(sys.argv[2]) * 2**20)
from rapidscore.encoder import Encoder
libc = ctypes.CDLL(None)
libc.mallopt(-3, 128 * 1024)  # the server's fixed mmap threshold (serve/process_tuning.py)

def rss_mib():
    libc.malloc_trim(0)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

encoder = Encoder(sys.argv[1], backend="onnx", batch_tokens=16384)
row = np.resize(encoder.tokenize(["a"])[0], encoder.max_length)
encoder.embed_ids([row[:8]], progress=False)
loaded = rss_mib()
encoder.embed_ids([row] * 32, progress=False)
print(json.dumps({"loaded": loaded, "after": rss_mib()}))
"""


def _child_result(code: str, model, reserve_mib: int, needs: str) -> dict:
    """The last JSON line of ``code`` run in a child process (the arena is process-wide) with the
    model and a reserve of ``reserve_mib``; skipped off Linux (``needs``: why)."""
    if not sys.platform.startswith("linux"):
        pytest.skip(needs)
    child = subprocess.run([sys.executable, "-c", code, str(model), str(reserve_mib)], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a child process loads the real MiniLM
def test_the_reserve_is_kept_and_growth_past_it_given_back(minilm_path) -> None:
    held = _child_result(_GROWTH_CHILD, minilm_path, 16, "reads /proc/self/status and calls glibc's malloc_trim")
    # A batch of 32 x 512 positions needs far more than the 16 MiB reserve (without the shrinking
    # run option it held +67 MiB here); what stays is the reserve and the allocator's slack.
    assert held["after"] - held["loaded"] < 16 + 24, held


# The whole reserve made resident before the server turns ready (serve/process_tuning.py): from
# then on, batches of shapes never seen before find its pages already counted.
_RESIDENT_CHILD = r"""
import ctypes, json, sys
import numpy as np
from rapidscore.serve import process_tuning
reserve = int(sys.argv[2]) * 2**20
before = process_tuning._anonymous_mappings()
from rapidscore.encoder.runtime.onnx import share_cpu_arena
share_cpu_arena(reserve)
from rapidscore.encoder import get_encoder
from rapidscore.encoder.shared import fill_working_memory
ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # the server's fixed mmap threshold

def rss_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

encoder = get_encoder(sys.argv[1], backend="onnx", batch_tokens=4096)
row = np.resize(encoder.tokenize(["a"])[0], encoder.max_length)
first = np.asarray(encoder.embed_ids([row[:40], row[:7]], progress=False).embeddings)
fill_working_memory(1)
filled = rss_mib()
resident = process_tuning._make_resident(before, reserve)
made = rss_mib()
for rows, length in ((3, 300), (9, 97), (1, 512), (5, 211), (8, 512)):
    encoder.embed_ids([row[:length]] * rows, progress=False)
again = np.asarray(encoder.embed_ids([row[:40], row[:7]], progress=False).embeddings)
print(json.dumps({"resident": resident, "filled": filled, "made": made, "after": rss_mib(),
                  "same": bool(np.array_equal(first, again))}))
"""


@pytest.mark.slow  # a child process loads the real MiniLM
def test_the_whole_reserve_is_resident_before_ready(minilm_path) -> None:
    held = _child_result(_RESIDENT_CHILD, minilm_path, 512, "reads /proc/self/maps and calls madvise")
    assert 512 * 2**20 <= held["resident"] <= 640 * 2**20, held  # the reserve's mapping (and merged neighbours)
    assert held["made"] - held["filled"] > 64, held  # the fill (a batch of 4,096 tokens) touched part of it
    assert held["after"] - held["made"] < 24, held  # batches of other shapes add only the allocator's slack
    assert held["same"], held  # no number changes

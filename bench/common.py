"""Shared helpers of the benchmark scripts: machine and version info, interleaved timing,
peak memory, a matrix-multiply peak probe, result files.

A script run as ``python bench/x.py`` has bench/ as its sys.path[0], so it imports this module as
``common``. The data the benchmarks share with the test suite (the synthetic English of W1-W4,
the random-weight bert-base and roberta-large models) is in ``rapidscore.testing``
(``corpora``, ``bench_models``), not here.

Nothing here imports torch or transformers at import time (the GEMM probe imports torch lazily),
so a child process that measures import time can use it.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
REPO_ROOT = BENCH_DIR.parent

# Flags that decide which precisions a CPU runs fast.
INTERESTING_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile")

PACKAGES = ("rapidscore", "numpy", "torch", "transformers", "tokenizers", "onnxruntime", "bert-score",
            "sentence-transformers", "rapidfuzz")


# ------------------------------------------------------------------------------------------------
# Machine, versions, date
# ------------------------------------------------------------------------------------------------

def _lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True,
                             env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    fields = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; containers often allow fewer than exist)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpu_info() -> list[str]:
    """GPU names from nvidia-smi, or [] when there is none (never imports torch)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def machine_info() -> dict:
    """CPU model, cores, SIMD flags of interest, memory, GPU, OS, Python, load average."""
    cpu = _lscpu()
    flags = set(cpu.get("Flags", "").split())
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            mem_kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
        memory_gib = round(mem_kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        memory_gib = None
    return {
        "cpu_model": cpu.get("Model name", platform.processor() or "unknown"),
        "cpus": int(cpu.get("CPU(s)", os.cpu_count() or 1)),
        "cpus_available": available_cpus(),
        "threads_per_core": cpu.get("Thread(s) per core"),
        "flags": [flag for flag in INTERESTING_FLAGS if flag in flags],
        "l3_cache": cpu.get("L3 cache"),
        "memory_gib": memory_gib,
        "gpu": gpu_info(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def package_versions(packages=PACKAGES) -> dict[str, str]:
    versions = {}
    for name in packages:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def machine_line(machine: dict) -> str:
    """One markdown line: CPU, cores, flags, GPU, memory."""
    gpu = "; GPU: " + ", ".join(machine["gpu"]) if machine["gpu"] else "; no GPU"
    return (f"{machine['cpu_model']}, {machine['cpus_available']} of {machine['cpus']} CPUs available, "
            f"flags {' '.join(machine['flags']) or 'none of interest'}, {machine['memory_gib']} GiB RAM{gpu}")


def versions_line(versions: dict) -> str:
    return ", ".join(f"{name} {ver}" for name, ver in versions.items())


# ------------------------------------------------------------------------------------------------
# Timing and memory
# ------------------------------------------------------------------------------------------------

def interleaved(contenders: dict[str, Callable[[], object]], reps: int, warmup: int = 1) -> tuple[dict, dict]:
    """Run each contender ``reps`` times, alternating between them.

    The order rotates every repetition (A B C, B C A, ...) so neither side always runs right after
    the other on a machine whose load drifts. ``warmup`` untimed rounds come first.
    Returns (seconds per contender: list over repetitions, last result per contender).
    """
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, object] = {}
    for _ in range(warmup):
        for name in names:
            results[name] = contenders[name]()
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            start = time.perf_counter()
            results[name] = contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times, results


def median(values) -> float:
    return float(statistics.median(values)) if values else float("nan")


def median_ratio(slow: list[float], fast: list[float]) -> float:
    """Median over repetitions of slow[i] / fast[i] (the two ran next to each other)."""
    return median([s / f for s, f in zip(slow, fast) if f > 0])


def percentile(values, q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]), as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB.

    Linux's VmHWM (/proc/self/status) where available: getrusage's ru_maxrss survives exec, so a
    child started from a big parent would report the parent's peak. Elsewhere ru_maxrss (KiB on
    Linux, bytes on macOS)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024.0


class Stopwatch:
    """Accumulates the time spent inside wrapped callables, by name."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def reset(self):
        self.seconds.clear()
        self.calls.clear()

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
                self.calls[name] = self.calls.get(name, 0) + 1

        timed.__wrapped__ = function
        return timed


# ------------------------------------------------------------------------------------------------
# Matrix-multiply peak
# ------------------------------------------------------------------------------------------------

def gemm_probe(n: int = 2048, repeats: int = 7, threads: int | None = None, bf16: bool = True) -> dict:
    """Measured matrix-multiply rate of this machine, GFLOP/s (2 n^3 FLOPs per n x n product).

    fp32 with numpy (its BLAS), torch (MKL) and ONNX Runtime (MLAS, one MatMul node); bf16 with
    torch where the CPU has avx512_bf16 or AMX. Each figure is the best of ``repeats`` products
    after one warm-up: on a shared machine the best run is the closest estimate of what the
    hardware can do. ``peak_fp32`` is the largest fp32 figure (the libraries differ a lot on
    some CPUs: MKL on AMD runs well below MLAS); it is the denominator of "fraction of peak".
    """
    import numpy as np

    flops = 2.0 * n ** 3
    out: dict = {"n": n, "repeats": repeats}

    def best_rate(run) -> float:
        run()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        return flops / best / 1e9

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out["numpy_fp32_gflops"] = round(best_rate(lambda: a @ b), 1)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        if threads:
            torch.set_num_threads(threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        with torch.inference_mode():
            out["torch_fp32_gflops"] = round(best_rate(lambda: ta @ tb), 1)
            flags = set(machine_info()["flags"]) if bf16 else set()
            if bf16 and {"avx512_bf16", "amx_bf16"} & flags:
                ha, hb = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
                out["torch_bf16_gflops"] = round(best_rate(lambda: ha @ hb), 1)
        out["torch_threads"] = torch.get_num_threads()
    ort_rate = _onnxruntime_matmul_rate(a, b, flops, repeats, threads)
    if ort_rate is not None:
        out["onnxruntime_fp32_gflops"] = round(ort_rate, 1)
    out["peak_fp32_gflops"] = max(out[key] for key in out if key.endswith("fp32_gflops"))
    return out


def _onnxruntime_matmul_rate(a, b, flops: float, repeats: int, threads: int | None) -> float | None:
    """GFLOP/s of one MatMul node in ONNX Runtime (its MLAS kernels), or None without onnx/onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    n = a.shape[0]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"])], "gemm_probe",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [n, n])],
        [numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or available_cpus()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {"A": a}
    session.run(None, feed)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        session.run(None, feed)
        best = min(best, time.perf_counter() - start)
    return flops / best / 1e9


# ------------------------------------------------------------------------------------------------
# Command line and offline cache
# ------------------------------------------------------------------------------------------------

def add_cache_and_out_arguments(parser) -> None:
    """``--cache-dir`` (synthetic models and rapidscore's ONNX cache) and ``--out`` (results)."""
    parser.add_argument("--cache-dir", default=os.environ.get("RAPIDSCORE_BENCH_CACHE",
                                                              str(Path.home() / ".cache" / "rapidscore-bench")),
                        help="synthetic models and rapidscore's ONNX cache for the benchmark")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="directory for <area>.md and <area>.json")


def offline_cache(cache_dir) -> Path:
    """Create the benchmark cache (models/ inside), point rapidscore's ONNX cache into it and keep
    the model hubs offline. Returns the cache directory."""
    cache = Path(cache_dir).expanduser()
    (cache / "models").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAPIDSCORE_CACHE", str(cache / "rapidscore"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return cache


# ------------------------------------------------------------------------------------------------
# Result files
# ------------------------------------------------------------------------------------------------

def write_results(area: str, markdown: str, data: dict, out_dir: Path = RESULTS_DIR) -> tuple[Path, Path]:
    """Write ``<out_dir>/<area>.md`` and ``<area>.json``; returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{area}.md", out_dir / f"{area}.json"
    md_path.write_text(markdown.rstrip() + "\n", encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, sort_keys=False, default=_jsonable) + "\n", encoding="utf-8")
    return md_path, json_path


def _jsonable(value):
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:
        pass
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def command_line() -> str:
    """The command that ran this script, as typed from the repository root."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(REPO_ROOT)
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


def fmt_ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}x"


def fmt_sci(value: float) -> str:
    return "n/a" if value != value else f"{value:.1e}"

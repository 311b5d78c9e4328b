"""`rapidscore serve`'s command line and settings, and the Prometheus text (no model runs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from rapidscore.serve.config import ServeConfig, load_config
from rapidscore.serve.prometheus import Histogram, ServerMetrics

HEAVY = ("numpy", "fastapi", "uvicorn", "pydantic", "onnxruntime", "rapidscore.serve.batching")


def test_serve_help_and_import_load_no_server_code():
    code = ("import json, runpy, sys\n"
            "sys.argv = ['rapidscore', 'serve', '--help']\n"
            "try:\n    runpy.run_module('rapidscore.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "import rapidscore.serve\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--batch-tokens" in out.stdout and "127.0.0.1" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_config_from_json_and_toml_with_flags_on_top(tmp_path):
    (tmp_path / "serve.json").write_text(json.dumps({"port": 9001, "batch_tokens": 4096, "max_queue": 7}))
    (tmp_path / "serve.toml").write_text("port = 9002\nsimilarity_threshold = 0.5\n")
    config = load_config(tmp_path / "serve.json", max_queue=9, port=None)
    assert (config.port, config.batch_tokens, config.max_queue, config.host) == (9001, 4096, 9, "127.0.0.1")
    config = load_config(tmp_path / "serve.toml")
    assert (config.port, config.similarity_threshold) == (9002, 0.5)
    assert load_config() == ServeConfig()


@pytest.mark.parametrize("content, message", [
    ('{"prot": 1}', r"unknown setting\(s\) \['prot'\]"),
    ("[1, 2]", "expected a table of settings"),
    ("{not json", r"serve.json:1: invalid JSON"),
    ('{"max_queue": 0}', "max_queue must be a positive int"),
    ('{"port": 70000}', "port must be an int"),
    ('{"similarity_threshold": 3}', "similarity_threshold must be in"),
])
def test_bad_config_names_the_problem(tmp_path, content, message):
    path = tmp_path / "serve.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_config(path)


def test_bad_toml_config_names_the_file(tmp_path):
    path = tmp_path / "serve.toml"
    path.write_text("port = = 1\n")
    with pytest.raises(ValueError, match=r"serve.toml: not valid TOML"):
        load_config(path)
    path.write_bytes(b"model = 'caf\xe9'\n")
    with pytest.raises(ValueError, match=r"serve.toml:1: not valid UTF-8 text"):
        load_config(path)


def test_cli_exits_2_with_a_message_for_a_bad_config(tmp_path):
    path = tmp_path / "serve.json"
    path.write_text('{"batch_tokens": -1}')
    out = subprocess.run([sys.executable, "-m", "rapidscore", "serve", "--config", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "rapidscore serve: error: batch_tokens must be a positive int" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "rapidscore", "serve", "--config", str(tmp_path / "missing.toml")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "config file not found" in out.stderr


def test_histogram_buckets_are_cumulative_counts():
    values = [0.0005, 0.003, 0.003, 0.2, 7.0, 50.0]
    histogram = Histogram((0.001, 0.01, 0.1, 1.0, 10.0))
    for value in values:
        histogram.observe(value)
    lines = histogram.lines("x", 'endpoint="/v1/a"')
    buckets = dict(re.findall(r'le="([^"]+)"\} (\d+)', "\n".join(lines)))
    for bound, count in buckets.items():
        limit = float("inf") if bound == "+Inf" else float(bound)
        assert int(count) == sum(1 for v in values if v <= limit), bound
    assert lines[-1] == 'x_count{endpoint="/v1/a"} 6' and lines[-2] == f'x_sum{{endpoint="/v1/a"}} {sum(values)!r}'


def test_metrics_text_is_prometheus_exposition():
    metrics = ServerMetrics()
    metrics.observe_request("/v1/bertscore", 200, 0.004)
    metrics.observe_request("/v1/bertscore", 503, 0.001)
    metrics.observe_batch(12, 300, 0.02)
    text = metrics.render(queue_depth=3, max_queue=8, rejected=1, ready=True)
    sample = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+-]+$|^# (HELP|TYPE) .+$')
    for line in text.strip().splitlines():
        assert sample.match(line), line
    assert 'rapidscore_requests_total{endpoint="/v1/bertscore",status="503"} 1' in text
    assert "rapidscore_batch_requests_sum 12" in text and "rapidscore_queue_depth 3" in text
    assert "rapidscore_rejected_total 1" in text and "rapidscore_ready 1" in text

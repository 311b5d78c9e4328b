#!/usr/bin/env bash
# Prepare .device/ (ignored by git) for bench/bench_gpu.py on the lent GPU machine (the
# workplace's `device` tool): the wheels that machine lacks, for its Python (DEVICE_PYTHON,
# default 3.12), and the embedded all-MiniLM-L6-v2 with fp16 weights (minilm_fp16.py: the
# package is over what may travel).
# About 48 MiB; run it here, then bench/device/run_gpu_bench.sh there (bench/README.md).
# DEVICE_DIR=DIR writes elsewhere (a dry run's install with DEVICE_PYTHON=3.11, say), leaving .device.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
DIR=${DEVICE_DIR:-.device}
if [[ $DIR == .device ]]; then
    grep -qxF '/.device/' .git/info/exclude || echo '/.device/' >> .git/info/exclude
fi
rm -rf "$DIR" && mkdir -p "$DIR/whl"
version() { "$PY" -c "from importlib.metadata import version; print(version('$1'))"; }
# The machine has torch, transformers, tokenizers, sentence-transformers, numpy, pandas, the build
# tools (cmake, ninja, pybind11, scikit-build-core): only these are missing (the versions here).
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PYTHON:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DIR/whl" "bert-score==0.3.13" "rapidfuzz==$(version rapidfuzz)" "anyascii==$(version anyascii)"
"$PY" bench/device/minilm_fp16.py pack "$DIR/minilm"
du -sh "$DIR"

#!/usr/bin/env bash
# Run on the lent GPU machine, from the repository root, with .device carried (bench/README.md):
#   bash bench/device/run_gpu_bench.sh [bench_gpu.py arguments]
# Installs the carried wheels and rapidscore (its C++ core built there) into /tmp/site, restores
# the embedded MiniLM, then runs bench/bench_gpu.py with the arguments given ($OUT/RESULTS_GPU.md
# and its .json by default, where the tool brings files back from).
set -euo pipefail
export PYTHONUNBUFFERED=1
SITE=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .device/whl/*.whl
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
python3 bench/device/minilm_fp16.py unpack .device/minilm "$SITE"
python3 -m pip install -q --no-build-isolation --no-deps --no-cache-dir --target "$SITE" . \
    || { echo "run_gpu_bench: building rapidscore failed" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [[ $# -eq 0 ]]; then
    set -- --out "${OUT:-/tmp}/RESULTS_GPU.md"
fi
python3 bench/bench_gpu.py "$@"

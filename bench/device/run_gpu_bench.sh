#!/usr/bin/env bash
# The one command of a GPU session (issue 39), run on the lent GPU machine from the repository root
# with .device carried (bench/README.md, "On the workplace's lent GPU machine"):
#
#   bash bench/device/run_gpu_bench.sh             # there: every step below, about 8 minutes
#   bash bench/device/run_gpu_bench.sh --dry-run   # here: the same steps with --device cpu --smoke
#   bash bench/device/run_gpu_bench.sh --bench-only [bench_gpu.py arguments]   # there: install, then
#                                                  # bench_gpu.py with these arguments only
#
# Steps, each under `timeout` with its own limit (clamped to what is left of RUN_BUDGET_S: 540 s
# there, where one command may run 600 s), each run whatever became of the one before; a summary of
# which passed comes last:
#   gpu-info    nvidia-smi, torch's view of the GPU (20 s)
#   install     the carried wheels and rapidscore (its C++ core built there) into $WORK/site, the
#               embedded MiniLM restored from .device/minilm (60 s; 22 s on an H200). The dry run skips it (this
#               machine's venv has everything; .device's wheels are for the GPU machine's Python)
#               unless DRY_RUN_INSTALL=1 and $DEVICE_DIR holds wheels for this Python
#               (DEVICE_PYTHON=3.11 DEVICE_DIR=... bash bench/device/prepare.sh)
#   cuda-tests  pytest -x -q over the tests with cuda / gpu / device in their ids, in the modules
#               CUDA_TESTS names and any tests/*/test_*cuda*.py, test_*gpu*.py (75 s; the dry
#               run only collects them: on a CPU they take minutes, the CUDA ones skipping)
#   profile     bench/profile_gpu.py: torch.profiler over G1 (10,000 pairs timed, 4,000 profiled)
#               and G3, fp16 and fp32 (130 s; it needed ~110 s on an H200)
#   bench-g1g3  bench/bench_gpu.py --parts G1,G3, G1 at 10,000 pairs, 3 repetitions (230 s)
#   bench-g2g4  bench/bench_gpu.py --parts G2,G4 at full size (5,000 pairs, 40,000 texts), 2
#               repetitions (what is left, at most 160 s)
# After each bench step the parts so far are merged (bench_gpu.py --merge) into $OUT/RESULTS_GPU.md.
#
# What comes back ($OUT; the device tool brings back at most 8 files, 16 MiB each):
#   run_gpu_bench.log, RESULTS_GPU.md, RESULTS_GPU.json (G1-G4 merged: copy into bench/ and
#   bench/results/gpu.json), profile/profile_gpu.md, profile/profile_gpu.json,
#   profile/trace_g1_fp16.json[.gz], profile/trace_g1_fp32.json[.gz], profile/trace_g3_fp32.json[.gz]
#   (other traces stay in $WORK/profile; a file over 16 MiB is left there and named in the log).
# Environment: OUT (default /tmp/gpu-bench/out, dry run /tmp/gpu-dry-run/out), WORK (scratch,
# emptied first; default /tmp/gpu-bench/work or /tmp/gpu-dry-run/work), DEVICE_DIR (.device),
# PYTHON (python3; dry run .venv/bin/python), RUN_BUDGET_S, PYTEST_ARGS (default -x -q), PROFILE_ARGS,
# G1G3_ARGS and G2G4_ARGS (more arguments of the full run's profile and bench steps), a step's
# limit LIMIT_<STEP> in seconds (LIMIT_CUDA_TESTS=90; 0 skips the step). The dry run uses smaller
# smoke sizes, limits DRY_LIMIT_SCALE (4) times longer and an 1800 s budget.
set -uo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$SELF")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1

MODE=full
case "${1:-}" in
    --dry-run) MODE=dry; shift ;;
    --bench-only) MODE=bench-only; shift ;;
    --step) ;;  # internal: one step, run under timeout by the main script
    "") ;;
    *) MODE=bench-only ;;  # the earlier use: bench_gpu.py arguments after the install
esac
if [[ $MODE == dry || ${RUN_GPU_BENCH_DRY:-0} == 1 ]]; then
    export RUN_GPU_BENCH_DRY=1
    ROOT=/tmp/gpu-dry-run
    DEFAULT_PY=python3
    [[ -x .venv/bin/python ]] && DEFAULT_PY=.venv/bin/python
    SMOKE=(--device cpu --smoke)
    DEFAULT_BUDGET=1800
    SCALE=${DRY_LIMIT_SCALE:-4}  # a shared 2-core CPU is far slower than the GPU machine
else
    ROOT=/tmp/gpu-bench
    DEFAULT_PY=python3
    SMOKE=()
    DEFAULT_BUDGET=540
    SCALE=1
fi
export OUT=${OUT:-$ROOT/out} WORK=${WORK:-$ROOT/work} DEVICE_DIR=${DEVICE_DIR:-.device}
export PY=${PYTHON:-$DEFAULT_PY}
SITE=$WORK/site
CACHE=$WORK/cache
CUDA_TESTS=(tests/encoder/test_fast_modes.py tests/bertscore/test_device_engine.py
            tests/kernels/test_matching_implementations.py tests/encoder/test_engine.py
            tests/encoder/test_packed_forward.py)
for test_file in tests/*/test_*cuda*.py tests/*/test_*gpu*.py; do  # newer CUDA test modules (not bench's)
    [[ -f $test_file && $test_file != tests/bench/* && " ${CUDA_TESTS[*]} " != *" $test_file "* ]] \
        && CUDA_TESTS+=("$test_file")
done
BACK_LIMIT=$((16 * 1024 * 1024))
DRY=${RUN_GPU_BENCH_DRY:-0}

# ------------------------------------------------------------------------------------------------
# Steps (each runs as `run_gpu_bench.sh --step NAME` under timeout)
# ------------------------------------------------------------------------------------------------

step_gpu_info() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi || return 1
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    else
        echo "no nvidia-smi on this machine"
        (( DRY )) || return 1
    fi
    "$PY" -c 'import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available(), "kineto", torch.autograd.kineto_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
}

step_install() {
    if (( DRY )) && [[ ${DRY_RUN_INSTALL:-0} != 1 ]]; then
        if [[ -d $DEVICE_DIR ]]; then
            echo "dry run: install skipped ($DEVICE_DIR holds wheels for the GPU machine's Python; the venv's"
            echo "rapidscore is used; DRY_RUN_INSTALL=1 with wheels for this Python runs it)"
        else
            echo "dry run: install skipped ($DEVICE_DIR is absent: bench/device/prepare.sh makes it; the venv's"
            echo "rapidscore and packages are used)"
        fi
        return 3
    fi
    if [[ ! -d $DEVICE_DIR/whl || ! -d $DEVICE_DIR/minilm ]]; then
        echo "install: $DEVICE_DIR/whl or $DEVICE_DIR/minilm is missing: run bash bench/device/prepare.sh here" \
             "and carry .device"
        return 1
    fi
    mkdir -p "$SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$DEVICE_DIR"/whl/*.whl || return 1
    PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} "$PY" bench/device/minilm_fp16.py unpack "$DEVICE_DIR/minilm" "$SITE" \
        || return 1
    "$PY" -m pip install -q --no-build-isolation --no-deps --no-cache-dir --target "$SITE" . || {
        echo "install: building rapidscore failed"; return 1; }
    PYTHONPATH=$SITE "$PY" -c 'import rapidscore, rapidscore._core as core; print("rapidscore", rapidscore.__file__, core.__file__)'
}

step_cuda_tests() {
    local how=()
    # On the CPU these tests take minutes (the CUDA ones skip): the dry run checks the selection.
    (( DRY )) && how=(--collect-only)
    # shellcheck disable=SC2086  # PYTEST_ARGS is a list of words
    "$PY" -m pytest ${PYTEST_ARGS:--x -q} "${how[@]}" -p no:cacheprovider "${CUDA_TESTS[@]}" -k 'cuda or gpu or device'
}

step_profile() {
    # shellcheck disable=SC2086  # PROFILE_ARGS is a list of words
    "$PY" bench/profile_gpu.py "${SMOKE[@]}" --out "$WORK/profile" --cache-dir "$CACHE" ${PROFILE_ARGS:-}
}

step_bench_g1g3() {
    if (( DRY )); then
        "$PY" bench/bench_gpu.py "${SMOKE[@]}" --parts G1,G3 --g1-pairs 40 --reps 1 --latency-calls 5 \
            --out "$WORK/g1g3.md" --cache-dir "$CACHE"
    else
        # shellcheck disable=SC2086  # G1G3_ARGS is a list of words
        "$PY" bench/bench_gpu.py --parts G1,G3 --g1-pairs 10000 --reps 3 --latency-calls 200 \
            --out "$WORK/g1g3.md" --cache-dir "$CACHE" ${G1G3_ARGS:-}
    fi
}

step_bench_g2g4() {
    if (( DRY )); then
        "$PY" bench/bench_gpu.py "${SMOKE[@]}" --parts G2,G4 --g2-pairs 20 --g4-texts 80 --reps 1 \
            --out "$WORK/g2g4.md" --cache-dir "$CACHE"
    else
        # shellcheck disable=SC2086  # G2G4_ARGS is a list of words
        "$PY" bench/bench_gpu.py --parts G2,G4 --g2-pairs 5000 --g4-texts 40000 --reps 2 \
            --out "$WORK/g2g4.md" --cache-dir "$CACHE" ${G2G4_ARGS:-}
    fi
}

step_merge() {
    local parts=()
    for part in "$WORK/g1g3.json" "$WORK/g2g4.json"; do
        [[ -f $part ]] && parts+=("$part")
    done
    if (( ${#parts[@]} == 0 )); then
        echo "merge: no bench results yet"
        return 1
    fi
    "$PY" bench/bench_gpu.py --merge "${parts[@]}" --out "$WORK/RESULTS_GPU.md" || return 1
    bring_back "$WORK/RESULTS_GPU.md" "$OUT/RESULTS_GPU.md"
    bring_back "$WORK/RESULTS_GPU.json" "$OUT/RESULTS_GPU.json"
}

bring_back() {  # bring_back FILE TARGET: copy into $OUT when the device tool can bring it back
    local size
    size=$(stat -c %s "$1" 2>/dev/null) || return 0
    if (( size > BACK_LIMIT )); then
        echo "left in $1: $((size / 1048576)) MiB is over the 16 MiB a file may come back"
        return 0
    fi
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2"
}

collect_profile() {
    local name file
    for name in profile_gpu.md profile_gpu.json trace_g1_fp16.json trace_g1_fp32.json trace_g3_fp32.json; do
        for file in "$WORK/profile/$name" "$WORK/profile/$name.gz"; do
            [[ -f $file ]] && bring_back "$file" "$OUT/profile/$(basename "$file")"
        done
    done
    return 0
}

if [[ ${1:-} == --step ]]; then
    export PYTHONPATH=${PYTHONPATH:-}
    if [[ -d $SITE ]]; then
        export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    fi
    "step_${2//-/_}"
    exit $?
fi

# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------

START=$(date +%s)
BUDGET=${RUN_BUDGET_S:-$DEFAULT_BUDGET}
SUMMARY=()
FAILED=0

run_step() {  # run_step NAME LIMIT_S: the step under timeout, clamped to the budget left
    local name=$1 override left took rc status limit
    override=LIMIT_${name//-/_}
    override=${override^^}
    limit=$((${!override:-$2} * SCALE))
    if (( limit <= 0 )); then
        SUMMARY+=("$(printf '%-11s %s' "$name" "skipped: $override=0")")
        echo "=== [$name] skipped: $override=0"
        return 0
    fi
    left=$((BUDGET - ($(date +%s) - START)))
    if (( left < 20 )); then
        SUMMARY+=("$(printf '%-11s %s' "$name" "skipped: the run's ${BUDGET} s are spent")")
        echo "=== [$name] skipped: the run's ${BUDGET} s are spent"
        FAILED=1
        return 1
    fi
    (( limit > left )) && limit=$left
    echo "=== [$name] start $(date +%H:%M:%S), limit ${limit} s"
    local t0
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" bash "$SELF" --step "$name"
    rc=$?
    took=$(($(date +%s) - t0))
    if (( rc == 0 )); then
        status=passed
    elif (( rc == 3 )); then
        status="skipped (see the log)"
        rc=0
    elif (( rc == 124 || rc == 137 )); then
        status="TIMED OUT (limit ${limit} s)"
    else
        status="FAILED (exit $rc)"
    fi
    (( rc == 0 )) || FAILED=1
    SUMMARY+=("$(printf '%-11s %-26s %4d s' "$name" "$status" "$took")")
    echo "=== [$name] $status after ${took} s"
    return $rc
}

main() {
    echo "run_gpu_bench ($MODE) $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown);" \
         "budget ${BUDGET} s; OUT=$OUT WORK=$WORK PYTHON=$PY"
    if [[ $MODE == bench-only ]]; then
        run_step install 300 || return 1
        local args=("$@")
        (( ${#args[@]} )) || args=(--out "$OUT/RESULTS_GPU.md")
        PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} "$PY" bench/bench_gpu.py "${args[@]}"
        return $?
    fi
    local installed=1
    run_step gpu-info 20
    run_step install 60 || installed=0
    if (( installed )); then
        run_step cuda-tests 75
        run_step profile 130
        collect_profile
        run_step bench-g1g3 230
        run_step merge 30
        run_step bench-g2g4 160
        run_step merge 30
    else
        SUMMARY+=("later steps skipped: the install did not pass (nothing to run them with)")
        echo "=== the install did not pass: the later steps are skipped (nothing to run them with)"
    fi
    echo
    echo "=== summary ($MODE, $(($(date +%s) - START)) s of ${BUDGET} s)"
    printf '  %s\n' "${SUMMARY[@]}"
    echo "=== in $OUT (the device tool brings back at most 8 files, 16 MiB each):"
    (cd "$OUT" && find . -type f -printf '  %p %s bytes\n' | sort)
    local count
    count=$(find "$OUT" -type f | wc -l)
    (( count <= 8 )) || echo "!!! $count files in $OUT: more than the 8 that come back"
    return $FAILED
}

case $WORK in
    /tmp/?*|"$PWD"/?*) rm -rf "$WORK" ;;
    *) echo "run_gpu_bench: WORK=$WORK is emptied first: give a folder under /tmp or the repository"; exit 2 ;;
esac
mkdir -p "$WORK" "$OUT"
# What an earlier run left in $OUT would come back as this run's (the device tool empties it; here not).
rm -rf "$OUT/run_gpu_bench.log" "$OUT/RESULTS_GPU.md" "$OUT/RESULTS_GPU.json" "$OUT/profile"
main "$@" 2>&1 | tee "$OUT/run_gpu_bench.log"

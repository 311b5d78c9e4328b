#!/usr/bin/env bash
# Runs each libFuzzer harness from its seed corpus (fuzz/corpus/NAME, read only: new inputs go
# to a temporary directory) with ASan + UBSan; any finding (a sanitizer report, a difference
# from the reference, a crash) fails the script and leaves the input in build/fuzz/.
#
#   fuzz/run.sh -max_total_time=20        (CI: 20 s per harness, past each harness's coverage plateau)
#   fuzz/run.sh -runs=1000000             (local: one million inputs per harness)
# Extra arguments go to every harness (libFuzzer flags). Build first: fuzz/build.sh.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$REPO/build/fuzz"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for harness in greedy_match align_spans phrase_match; do
    work=$(mktemp -d -t "fuzz-$harness-XXXXXX")
    log="$OUT/fuzz_$harness.log"
    echo "== fuzz_$harness $*"
    if "$OUT/fuzz_$harness" -artifact_prefix="$OUT/fuzz_$harness-" -print_final_stats=1 "$@" \
        "$work" "$REPO/fuzz/corpus/$harness" >"$log" 2>&1; then
        grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|Done [0-9]+ runs" "$log" || true
    else
        status=1
        echo "fuzz_$harness FAILED: see $log"; tail -40 "$log"
    fi
    rm -rf "$work"
done
exit $status

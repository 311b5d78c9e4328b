#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang with -fsanitize=fuzzer,address,undefined) into build/fuzz/.
#   fuzz/build.sh            (CXX=clang++-14 by default when clang++ is not on PATH)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CXX=${CXX:-$(command -v clang++ || command -v clang++-14)}
OUT="$REPO/build/fuzz"
mkdir -p "$OUT"
for harness in greedy_match align_spans phrase_match; do
    "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I "$REPO/csrc" "$REPO/fuzz/fuzz_$harness.cpp" -o "$OUT/fuzz_$harness" -lpthread
done
echo "built: $(ls "$OUT")"

#!/usr/bin/env bash
# Builds rapidscore._core with AddressSanitizer + UBSan (CMake option RAPIDSCORE_SANITIZE, Debug)
# from a clean checkout into a temporary virtualenv, then runs native-kernel tests under it.
#
#   tests/run_sanitized.sh [pytest args...]      (default: every native-kernel test:
#                                                 tests/kernels and tests/hardening/test_native_hardening.py)
#   tests/run_sanitized.sh --build-only DIR      only build the sanitized wheel into DIR (pip's isolated
#                                                 build: needs no installed package, e.g. beside a venv's
#                                                 install in CI), then stop
#
# Environment:
#   PYTHON        interpreter whose installed packages (numpy, pytest, hypothesis, torch,
#                 bert-score, scikit-build-core, pybind11) the temporary venv borrows
#                 (default: python3). Nothing is installed into it.
#   RAPIDSCORE_SRC=worktree   build the current working tree (tracked + untracked, not ignored)
#                 instead of the committed HEAD.
#   KEEP_TMP=1    keep the temporary directory (printed at the end).
#   SANITIZED_WHEEL=path.whl  install this wheel (made by --build-only from the same tree) instead
#                 of building one.
# Exit status: pytest's. Any ASan/UBSan report aborts the process (halt_on_error=1).
set -euo pipefail

PYTHON=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d -t rapidscore-sanitize-XXXXXX)
cleanup() { if [[ "${KEEP_TMP:-0}" != 1 ]]; then rm -rf "$TMP"; else echo "kept $TMP"; fi; }
trap cleanup EXIT

# 1. Clean checkout (no build outputs, no stale extension modules).
mkdir -p "$TMP/src"
if [[ "${RAPIDSCORE_SRC:-head}" == worktree ]]; then
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' |
        tar --null -T - -cf -) | tar -xf - -C "$TMP/src"
else
    git -C "$REPO" archive HEAD | tar -xf - -C "$TMP/src"
fi

BUILD_SETTINGS=(--config-settings=cmake.define.RAPIDSCORE_SANITIZE=ON --config-settings=cmake.build-type=Debug
                --config-settings=build-dir="$TMP/build")
if [[ "${1:-}" == --build-only ]]; then
    OUT=${2:?--build-only needs a directory}
    mkdir -p "$OUT"
    "$PYTHON" -m pip wheel --quiet --no-deps -w "$OUT" "$TMP/src" "${BUILD_SETTINGS[@]}"
    exit 0
fi

# 2. Temporary venv that sees $PYTHON's packages through a .pth line (only sys.path entries,
#    so an editable rapidscore installed there is not picked up) and gets its own rapidscore.
"$PYTHON" -m venv "$TMP/venv"
VPY="$TMP/venv/bin/python"
DEPS=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VSITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$DEPS" > "$VSITE/_borrowed_deps.pth"

if [[ -n "${SANITIZED_WHEEL:-}" ]]; then
    "$VPY" -m pip install --quiet --no-deps "$SANITIZED_WHEEL"
else
    "$VPY" -m pip install --quiet --no-build-isolation --no-deps "$TMP/src" "${BUILD_SETTINGS[@]}"
fi

# The instrumented module can only be loaded with the ASan runtime preloaded. libstdc++ is
# preloaded too: python does not link it, and ASan's __cxa_throw interceptor must find it at
# start-up or the first C++ exception aborts ("real___cxa_throw != 0" CHECK failure).
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$VPY" - <<'EOF'
import rapidscore._core as core
info = {name: getattr(core.build_info, name) for name in ("version", "compiler", "cplusplus", "debug")}
assert info["debug"], info
print("sanitized build:", core.__file__, info)
EOF

# 3. Run the tests (ASan runtime preloaded above; the interpreter itself is not instrumented,
#    leak detection is off because CPython keeps objects alive until exit by design).
if [[ $# -eq 0 ]]; then set -- tests/kernels tests/hardening/test_native_hardening.py; fi
export RAPIDSCORE_SANITIZED=1  # tests that need a small address space (ASan reserves terabytes) skip
cd "$TMP/src"
"$VPY" -m pytest -q -p no:cacheprovider "$@"

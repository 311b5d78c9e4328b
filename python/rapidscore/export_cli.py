"""``rapidscore export MODEL``: export a model's ONNX graphs into a cache, on a build machine.

The runtime that reads the cache needs neither torch nor transformers (docs/serving.md, "Lean
runtime"): ``pip install 'rapidscore[cpu]'`` and ``RAPIDSCORE_CACHE`` pointing at the exported
cache. For a hub id the cache also keeps the model's files without its weights
(``model_source.save_weightless_copy``), so the cache alone resolves the name.

Imports argparse only at module level (the CLI's parser is built without loading the encoder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rapidscore.common.cli_options import add_common_options
from rapidscore.common.file_options import input_option, output_option

__all__ = ["add_arguments", "run", "export_model"]


def _layer(value: str) -> int | str:
    if value == "all":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a layer is an int or 'all', got {value!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument("model", help="hub id or model directory (all-MiniLM-L6-v2: the embedded copy)"),
                 directory=True, text=True)
    parser.add_argument("--layer", type=_layer, action="append", default=None, metavar="N",
                        help="hidden_states[N] to export (repeat for several; 'all' = every layer); default: "
                             "BERTScore's tuned layer for the model and its last layer (sentence vectors)")
    output_option(parser.add_argument("--cache", default=None, metavar="DIR",
                        help="cache directory to export into, read by the runtime as RAPIDSCORE_CACHE "
                             "(default: $RAPIDSCORE_CACHE or ~/.cache/rapidscore)"), directory=True)
    parser.add_argument("--name", default=None,
                        help="name the runtime will use for a model given as a directory (a hub-id-like "
                             "org/name): the cache then keeps its files without the weights under that name")
    parser.add_argument("--no-unpadded", dest="unpadded", action="store_false",
                        help="skip the unpadded graphs (used by 'rapidscore serve' where the family has one)")
    add_common_options(parser, model=False, progress_default=False,
                       json_help="print one JSON document: the cache, the entries, the weightless copy")


def export_model(model: str | os.PathLike, layers: list[int | str] | None = None,
                 cache: str | os.PathLike | None = None, *, name: str | None = None,
                 unpadded: bool = True) -> dict:
    """Export (or find) the ONNX entries of ``model`` at ``layers`` into the cache ``cache`` (the
    layout of ``RAPIDSCORE_CACHE``: entries in ``onnx/``), the unpadded graph too where the family
    has one, and, for a hub id or ``name``, the model's files without its weights (``models/``).

    Returns ``{"cache", "model_dir", "weightless_copy", "entries": [{"layer", "unpadded", "entry",
    "exported"}]}``. Needs the [export] extra for every entry not yet in the cache.
    """
    from rapidscore.bertscore.model_table import tuned_layer
    from rapidscore.encoder.export.onnx_export import cached_export
    from rapidscore.encoder.model_source import (
        cache_base,
        canonical_name,
        check_copy_name,
        num_layers,
        read_config,
        resolve_model,
        save_weightless_copy,
        unpadded_supported,
        weightless_record,
    )

    base = Path(cache).expanduser() if cache is not None else cache_base()
    if name is not None:
        check_copy_name(name)  # before the exports, not after them
    model_dir = resolve_model(model)
    config = read_config(model_dir)
    depth = num_layers(config)
    given_as_directory = Path(os.fspath(model)).expanduser().is_dir()
    if layers is None:
        tuned = None if given_as_directory else tuned_layer(canonical_name(os.fspath(model)))
        layers = [layer for layer in (tuned, depth) if layer is not None]
    chosen: list[int | str] = []
    for layer in layers:
        if layer != "all" and (isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= depth):
            raise ValueError(f"--layer must be in [0, {depth}] or 'all' for {os.fspath(model)!r}, got {layer!r}")
        if layer not in chosen:
            chosen.append(layer)
    entries = []
    for layer in chosen:
        graphs = [False, True] if unpadded and unpadded_supported(config, layer) else [False]
        for graph_unpadded in graphs:
            entry, exported = cached_export(model_dir, layer, "fp32", None, cache_dir=base / "onnx",
                                            unpadded=graph_unpadded, use_shipped=False)  # written into base
            entries.append({"layer": layer, "unpadded": graph_unpadded, "entry": str(entry), "exported": exported})
    copy_name = name if name is not None else (None if given_as_directory else canonical_name(os.fspath(model)))
    copy = None
    if copy_name is not None and weightless_record(model_dir) is None:
        copy = str(save_weightless_copy(model_dir, copy_name, base))
    return {"cache": str(base), "model_dir": str(model_dir), "weightless_copy": copy, "entries": entries}


def run(args: argparse.Namespace) -> int:
    if args.threads:
        from rapidscore.threads import set_thread_budget

        set_thread_budget(args.threads)
    result = export_model(args.model, args.layer, args.cache, name=args.name, unpadded=args.unpadded)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for item in result["entries"]:
        graph = " (unpadded graph)" if item["unpadded"] else ""
        state = "exported" if item["exported"] else "already in the cache"
        print(f"layer {item['layer']}{graph}: {item['entry']} ({state})")
    if result["weightless_copy"]:
        print(f"model files without weights: {result['weightless_copy']}")
    elif not args.quiet:
        print("note: no --name for this directory: the runtime needs a copy of the model directory",
              file=sys.stderr)
    if not args.quiet:
        print(f"runtime: RAPIDSCORE_CACHE={result['cache']} (needs onnxruntime, not torch)", file=sys.stderr)
    return 0

"""``rapidscore nrr``: Negative Rejection Rate of generated answers against references."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from rapidscore.common.cli_options import add_common_options, encoder_options, print_table, run_only, show_progress
from rapidscore.common.file_options import input_option, model_option, output_option
from rapidscore.common.stream_io import add_stream_arguments

if TYPE_CHECKING:
    from rapidscore.nrr.scoring import IndexedItems

LIST_REJECTED = 10  # the text output names the rejected answers when there are at most this many


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument(
        "--generated", default=None,
        help="generated answers: text file (one per line) or .jsonl/.json/.csv/.tsv/.parquet (.gz too)"))
    input_option(parser.add_argument(
        "--references", default=None, nargs="+", action="extend",
        help="reference file(s); several files = several references per item (best counts)"))
    parser.add_argument("--generated-column", default="generated",
                        help="key/column in .jsonl/.json/.csv/.tsv/.parquet input")
    parser.add_argument("--reference-column", default="reference",
                        help="key/column in .jsonl/.json/.csv/.tsv/.parquet input")
    parser.add_argument("--threshold", type=float, default=0.8, help="rejected when similarity < threshold")
    model_option(parser.add_argument("--model", default=None,
                                     help="model hub id or directory (default: embedded all-MiniLM-L6-v2)"))
    parser.add_argument("--method", default="embedding", choices=("embedding", "bertscore"))
    parser.add_argument("--prompt-name", default=None, metavar="NAME",
                        help="embedding method: one of the model's sentence-transformers prompts (e.g. query); "
                             "default: the model's default prompt, if it has one")
    run_only(parser.add_argument("--table", action="store_true",
                                 help="print a per-answer table: similarity, rejected, best reference (as bertscore "
                                      f"--table); without it, the rejected answers are listed when at most "
                                      f"{LIST_REJECTED}"))
    output_option(parser.add_argument("--plot", default=None, metavar="FILE",
                                      help="save a similarity histogram with the threshold line (needs matplotlib; "
                                           "PNG, or SVG / PDF by the extension)"))
    output_option(parser.add_argument("--plot-curve", default=None, metavar="FILE",
                                      help="save NRR as a function of the threshold (needs matplotlib)"))
    add_common_options(parser)
    add_stream_arguments(parser, item="answer")


def run(args: argparse.Namespace) -> int:
    from rapidscore.encoder.model_source import DEFAULT_MODEL
    from rapidscore.nrr import SentenceSimilarity, plot_similarities
    from rapidscore.nrr.scoring import check_threshold

    if args.output or args.input or args.resume:
        return _run_streaming(args)
    if not args.generated or not args.references:
        raise ValueError("give --generated and --references (or --input/--output to stream)")
    items = _read_items(args)
    if not len(items.sizes):  # the same words as bertscore's
        raise ValueError(f"nothing to evaluate: {args.generated} is empty")
    threshold = check_threshold(args.threshold)  # before the model loads
    model = SentenceSimilarity(args.model or DEFAULT_MODEL, args.method, progress=show_progress(args),
                               prompt_name=args.prompt_name, **encoder_options(args))
    result = model.indexed_rejection(items, threshold)
    if args.plot:
        plot_similarities(result, args.plot)
    if args.plot_curve:
        from rapidscore.nrr.plot import plot_nrr_curve

        plot_nrr_curve({os.path.basename(args.generated): result}, args.plot_curve)
    if args.json:
        from rapidscore.common.readers import parallel_items
        from rapidscore.compare.digests import references_sha256

        # references_sha256: rapidscore compare refuses systems scored against other references
        refs = (refs for _text, refs, _where in parallel_items(args.generated, args.references, args.generated_column,
                                                              args.reference_column))
        json.dump({**result.to_dict(), "references_sha256": references_sha256(refs)}, sys.stdout, indent=1)
        print()
        return 0
    print(result.signature)
    print(f"evaluated {result.n_evaluated}  rejected (similarity < {result.threshold:g}) {result.n_rejected}  "
          f"captured {result.n_captured}")
    print(f"negative rejection rate: {result.rate:.4f}   capture rate (1 - NRR): {result.capture_rate:.4f}")
    if args.table:
        _print_items(result, several=bool((items.sizes > 1).any()))
    elif result.n_rejected:
        _print_rejected(result)
    return 0


def _read_items(args: argparse.Namespace) -> IndexedItems:
    """The answers and their references as indices into their distinct texts: a million rows of
    a few texts hold a few texts and arrays of numbers, not a million strings."""
    from rapidscore.common.readers import parallel_items
    from rapidscore.nrr.scoring import ItemIndex

    index = ItemIndex()
    for text, refs, _where in parallel_items(args.generated, args.references, args.generated_column,
                                             args.reference_column):
        index.add(text, refs)
    return index.items()


def _print_items(result, several: bool) -> None:
    """--table: one row per answer (numbered from 1, as bertscore's candidates); the best
    reference (numbered from 1) where an answer has several."""
    header = ["Answer", "Similarity", "Rejected"] + (["Best reference"] if several else [])
    best = result.best_reference.tolist() if several and result.best_reference is not None else None
    rows = ([i, f"{sim:.3f}", "yes" if no else "no", *([best[i - 1] + 1] if best is not None else [])]
            for i, (sim, no) in enumerate(zip(result.similarities.tolist(), result.rejected.tolist()), start=1))
    print_table(header, rows)


def _print_rejected(result) -> None:
    """The rejected answers (numbered from 1) with their similarities, when they are few."""
    import numpy as np

    rejected = np.flatnonzero(result.rejected)  # not a Python pair per answer: there may be millions
    if len(rejected) > LIST_REJECTED:
        print(f"rejected answers: {len(rejected)} (--table lists every answer, --json their similarities)")
    else:
        print("rejected answers (similarity): " + ", ".join(f"{i + 1} ({result.similarities[i]:.3f})"
                                                            for i in rejected.tolist()))


def _run_streaming(args: argparse.Namespace) -> int:
    """``--output``: similarity and decision per answer, written as they are computed (see
    docs/scale.md; the same resume contract as ``rapidscore bertscore --output``)."""
    from rapidscore.common.readers import count_rows, row_items
    from rapidscore.common.stream_io import RowIds, file_items, run_stream
    from rapidscore.encoder.model_source import DEFAULT_MODEL
    from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold, rejected_below

    if not args.output:
        raise ValueError("streaming writes --output FILE (or '-')")
    if args.plot or args.plot_curve:
        raise ValueError(f"{'--plot' if args.plot else '--plot-curve'} needs every similarity at once: leave out "
                         "--output")
    threshold = check_threshold(args.threshold)
    if args.input:
        if args.generated or args.references:
            raise ValueError("give either --input or --generated/--references files, not both")
        items = row_items(args.input, args.input_format, args.generated_column, [args.reference_column],
                          args.id_column)
        source, fmt = args.input, args.input_format
    elif args.generated and args.references:
        if args.id_column:
            raise ValueError("--id-column needs --input")
        items = file_items(args.generated, args.references, args.generated_column, args.reference_column)
        source, fmt = args.generated, None
    else:
        raise ValueError("streaming needs --input FILE (or '-'), or --generated and --references files")
    model = SentenceSimilarity(args.model or DEFAULT_MODEL, args.method, prompt_name=args.prompt_name,
                               **encoder_options(args))
    ids = RowIds(args.id_column)
    counts = {"rejected": 0, "evaluated": 0}

    def score_chunks(rows, first_index: int):
        index = first_index
        # chunks bounded in characters too: a few rows of megabytes of text are a chunk
        for chunk, sims, best in model.score_chunks(ids.strip(rows), chunk_size=args.chunk_size or 4096):
            rejected = rejected_below(sims, threshold).tolist()
            counts["rejected"] += sum(rejected)
            counts["evaluated"] += len(rejected)
            out = ids.rows(index, ({"similarity": sim, "rejected": no, "best_reference": ref}
                                   for sim, no, ref in zip(sims.tolist(), rejected, best.tolist())))
            index += len(out)
            yield chunk, out

    columns = ["index", *(["id"] if args.id_column else []), "similarity", "rejected", "best_reference"]
    settings = {"command": "nrr", "signature": model.signature, "threshold": threshold,
                "generated_column": args.generated_column if args.input else None,
                "reference_column": args.reference_column if args.input else None, "id_column": args.id_column}
    run_stream(items=iter(items), score_chunks=score_chunks, output=args.output, output_fmt=args.output_format,
               columns=columns, settings=settings, resume=args.resume, progress=show_progress(args),
               total=count_rows(source, fmt), unit="answer", quiet=args.quiet)
    if not args.quiet and counts["evaluated"]:
        print(f"this run: rejected {counts['rejected']} of {counts['evaluated']} (similarity < {threshold:g}): "
              f"negative rejection rate {counts['rejected'] / counts['evaluated']:.4f}", file=sys.stderr)
    return 0

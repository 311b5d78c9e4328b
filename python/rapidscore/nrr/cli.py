"""``rapidscore nrr``: Negative Rejection Rate of generated answers against references."""

from __future__ import annotations

import argparse
import json
import sys

from rapidscore.common.cli_options import add_common_options, encoder_options, show_progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--generated", required=True,
                        help="generated answers: text file (one per line) or .jsonl/.csv/.tsv/.parquet")
    parser.add_argument("--references", required=True, nargs="+", action="extend",
                        help="reference file(s); several files = several references per item (best counts)")
    parser.add_argument("--generated-column", default="generated", help="key/column in .jsonl/.csv/.parquet input")
    parser.add_argument("--reference-column", default="reference", help="key/column in .jsonl/.csv/.parquet input")
    parser.add_argument("--threshold", type=float, default=0.8, help="rejected when similarity < threshold")
    parser.add_argument("--model", default=None, help="model hub id or directory (default: embedded all-MiniLM-L6-v2)")
    parser.add_argument("--method", default="embedding", choices=("embedding", "bertscore"))
    parser.add_argument("--plot", default=None, metavar="FILE", help="save a similarity histogram (needs matplotlib)")
    add_common_options(parser)


def run(args: argparse.Namespace) -> int:
    from rapidscore.common.io import read_column, read_texts
    from rapidscore.encoder.model_source import DEFAULT_MODEL
    from rapidscore.nrr import negative_rejection, plot_similarities

    generated = read_texts(args.generated, args.generated_column)
    per_file = [read_column(path, args.reference_column) for path in args.references]
    for path, refs in zip(args.references, per_file):
        if len(refs) != len(generated):
            raise ValueError(f"{path} has {len(refs)} references for {len(generated)} generated answers")
    references = [list(group) for group in zip(*per_file)] if len(per_file) > 1 else per_file[0]
    result = negative_rejection(generated, references, threshold=args.threshold, model=args.model or DEFAULT_MODEL,
                                method=args.method, progress=show_progress(args), **encoder_options(args))
    if args.plot:
        plot_similarities(result, args.plot)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=1)
        print()
        return 0
    print(result.signature)
    print(f"evaluated {result.n_evaluated}  rejected (similarity < {result.threshold:g}) {result.n_rejected}  "
          f"captured {result.n_captured}")
    print(f"negative rejection rate: {result.rate:.4f}   capture rate (1 - NRR): {result.capture_rate:.4f}")
    return 0

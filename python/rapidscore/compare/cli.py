"""``rapidscore compare``: is a system better than the baseline? Paired significance tests and
bootstrap intervals over result files that other commands wrote.

Examples::

    rapidscore compare base.json a.json b.json --baseline base              # bertscore --json outputs
    rapidscore compare ner.json --baseline spacy --metric strict_f1 --format latex
    rapidscore compare base=run1/rows.jsonl new=run2/rows.jsonl --paired-bs --json
    rapidscore compare select/results --baseline model-a/prompt --metric specificity   # SELECT, by concept

A system's name is its file's stem, or NAME in NAME=FILE; a NER file holds one system per model, a
SELECT results folder one per (model, technique) cell.
"""

from __future__ import annotations

import argparse
import os
import sys

from rapidscore.common.cli_options import add_common_options, positive_int
from rapidscore.common.file_options import input_option, output_option

FORMATS = ("text", "markdown", "latex", "json")
CORRECTIONS = ("holm", "bonferroni", "none")


def _result_path(value: str) -> list[str]:
    """The file of a ``[NAME=]FILE`` value (a path holding '=' is a path)."""
    name, sep, path = value.partition("=")
    return [path] if sep and name and path and not os.path.exists(value) else [value]


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument(
        "results", nargs="+", metavar="[NAME=]RESULT",
        help="result files of one metric (the --json outputs or --output rows of bertscore, nrr, ner or a metric "
             "command), or SELECT results folders (each model/technique a system, paired by concept); NAME=FILE "
             "names the system (default: the file name without extensions)"),
        paths=_result_path, directory=True)
    parser.add_argument("--baseline", "-b", default=None, metavar="NAME",
                        help="the system every other is tested against (default: the first)")
    parser.add_argument("--metric", default=None,
                        help="what to compare (default per kind: bertscore f1, nrr rejection_rate, ner strict_f1, "
                             "SELECT abstention, a metric's first output; see docs/compare.md)")
    tests = parser.add_argument_group("tests (sacrebleu's option names; default: both)")
    tests.add_argument("--paired-bs", action="store_true", help="paired bootstrap resampling (p_bootstrap)")
    tests.add_argument("--paired-ar", action="store_true",
                       help="paired approximate randomization (p_randomization)")
    tests.add_argument("--paired-bs-n", type=positive_int, default=10_000, metavar="N",
                       help="bootstrap resamples, also those of every interval (default 10000)")
    tests.add_argument("--paired-ar-n", type=positive_int, default=10_000, metavar="N",
                       help="randomization trials (default 10000; every swap pattern when 2**items <= N: exact)")
    tests.add_argument("--seed", type=int, default=12345, help="the resamples' seed (default 12345, sacrebleu's)")
    tests.add_argument("--confidence", type=_level, default=0.95, help="the intervals' level (default 0.95)")
    tests.add_argument("--correction", choices=CORRECTIONS, default="holm",
                       help="for testing several systems against the baseline (default holm)")
    tests.add_argument("--alpha", type=_level, default=0.05,
                       help="the level below which an adjusted p-value is marked significant (default 0.05)")
    tests.add_argument("--resampler", choices=("splitmix64", "numpy"), default="splitmix64",
                       help="the resamples' random stream: splitmix64 (default; the native kernel) or numpy (the "
                            "resamples scipy.stats.bootstrap and sacrebleu draw for the same seed; slower)")
    tests.add_argument("--bootstrap-p", choices=("two-sided", "sacrebleu"), default="two-sided",
                       help="the bootstrap p-value: two-sided (default) or sacrebleu's own definition "
                            "(docs/compare.md says how they differ)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="the table's format (--json = --format json)")
    output_option(parser.add_argument("--output", "-o", default=None, metavar="FILE",
                                      help="write the table here instead of stdout"))
    add_common_options(parser, model=False, progress_default=False,
                       json_help="per system its name, mean and interval; against the baseline the difference, "
                                 "its interval, p_bootstrap and p_randomization")


def run(args: argparse.Namespace) -> int:
    from rapidscore.common.outputs import open_output
    from rapidscore.compare.inputs import compare_files
    from rapidscore.compare.tables import render

    if args.seed < 0:
        raise ValueError(f"--seed: expected a non-negative integer, got {args.seed}")
    chosen = [test for test, on in (("bootstrap", args.paired_bs), ("randomization", args.paired_ar)) if on]
    result = compare_files(args.results, args.baseline, metric=args.metric,
                           tests=chosen or ("bootstrap", "randomization"), resamples=args.paired_bs_n,
                           trials=args.paired_ar_n, seed=args.seed, confidence=args.confidence,
                           correction=args.correction, alpha=args.alpha, bootstrap_p=args.bootstrap_p,
                           resampler=args.resampler)
    text = render(result, "json" if args.json else args.format)
    if args.output:
        with open_output(args.output, "--output") as handle:
            handle.write(text)
        if not args.quiet:
            print(f"rapidscore compare: wrote {args.output} ({len(result.systems)} systems)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0

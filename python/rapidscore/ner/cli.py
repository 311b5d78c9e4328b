"""``rapidscore ner``: compare NER models against a gold standard (DMBertA + SemEval).

Examples::

    rapidscore ner --gold gold.jsonl --pred gliner=gliner.jsonl --pred spacy=spacy.jsonl
    rapidscore ner --gold combined.jsonl --json          # "gold" + "predictions" per line
    rapidscore ner --input records.jsonl --output scores.jsonl   # streamed: "gold", "predicted" per row
"""

from __future__ import annotations

import argparse
import json
import sys

from rapidscore.common.cli_options import add_common_options, encoder_options, show_progress
from rapidscore.common.file_options import input_option, model_option, output_option
from rapidscore.common.stream_io import add_column_option, add_stream_arguments

# Kept import-light: the evaluation modules (numpy, the encoder) load inside run().


def _model_file(value: str) -> tuple:
    name, sep, path = value.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise argparse.ArgumentTypeError(f"--pred expects NAME=FILE, got {value!r}")
    return name.strip(), path.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument("--gold", default=None, metavar="FILE",
                        help="gold JSONL ({'id', 'text' or 'prompt', 'labels'} per line; the rows of a .json "
                             "array, .csv/.tsv or .parquet work too, .gz too), or a combined file "
                             "with 'gold' and 'predictions': {model: ...} per line when no --pred is given"))
    input_option(parser.add_argument("--pred", action="append", type=_model_file, default=[], metavar="NAME=FILE",
                                     help="one model's predictions (JSONL joined to the gold by id); repeat per "
                                          "model"), paths=lambda named: [named[1]])
    parser.add_argument("--format", default="auto", help="entity format of the predictions (default: auto)")
    parser.add_argument("--gold-format", default=None, help="entity format of the gold (default: as --format)")
    parser.add_argument("--label-similarity", choices=("embedding", "exact"), default="embedding",
                        help="compare labels by embedding cosine (default) or exact match")
    model_option(parser.add_argument("--label-model", default=None, metavar="M",
                        help="encoder for label embeddings (default: the embedded all-MiniLM-L6-v2; "
                             "bert-base-uncased reproduces the seed's choice)"))
    input_option(parser.add_argument("--label-map", default=None, metavar="FILE",
                                     help="JSON object {label: canonical label} of synonyms (scored 1 when equal)"),
                 settings=True)
    parser.add_argument("--min-jaccard", type=float, default=0.0,
                        help="minimum character Jaccard for a DMBertA pair (default 0: any overlap)")
    parser.add_argument("--min-overlap-percent", type=float, default=1.0,
                        help="SemEval overlap threshold, percent of the gold span (default 1, as nervaluate)")
    parser.add_argument("--semeval-matching", choices=("optimal", "nervaluate"), default="optimal",
                        help="optimal one-to-one matching (default) or nervaluate's greedy first match")
    parser.add_argument("--no-trim", action="store_true", help="do not trim whitespace/punctuation at span edges")
    parser.add_argument("--on-missing-surface", choices=("error", "drop"), default="error",
                        help="a surface not found in the text: stop with an error (default) or drop and report it")
    # Token labels (docs/ner.md, "Token labels"): CoNLL files in, seqeval's span report out.
    parser.add_argument("--scheme", default=None, metavar="SCHEME",
                        help="token-label input: --gold/--pred are CoNLL files (one token per line, label in the "
                             "last column); print seqeval's span report. SCHEME: IOB1, IOB2, IOE1, IOE2, IOBES, "
                             "BILOU or auto. Without --pred, the gold file's last two columns are gold and predicted")
    parser.add_argument("--strict", action="store_true", help="with --scheme: seqeval's mode='strict'")
    parser.add_argument("--tag-column", type=int, default=-1, metavar="N",
                        help="with --scheme: the label column (default -1, the last)")
    output_option(parser.add_argument("--plot", default=None, metavar="FILE",
                                      help="save DMBertA and the SemEval F1 of each model as grouped bars (needs "
                                           "matplotlib; PNG, or SVG / PDF by the extension)"))
    output_option(parser.add_argument("--plot-by-type", default=None, metavar="FILE",
                                      help="save each entity type's SemEval F1 and DMBertA recall per model"))
    # one row per record in, one row of scores per record out, resumable (docs/ner.md, "Streaming")
    add_column_option(add_stream_arguments(parser, item="record"))
    # --backend/--device/--precision: the label encoder of --label-similarity embedding
    add_common_options(parser,  # bars as every command's: on a terminal, after a second of work
                       json_help="print one JSON document keyed by model name (scores, SemEval per entity type, "
                                 "per-label, per-record detail with each scheme's correct/incorrect/partial/"
                                 "missed/spurious entities)")


# the options of the batch mode only (entity files joined by id, tag files, figures)
_BATCH_ONLY = (("gold", "--gold"), ("pred", "--pred"), ("scheme", "--scheme"), ("strict", "--strict"),
               ("plot", "--plot"), ("plot_by_type", "--plot-by-type"))


def run(args: argparse.Namespace) -> int:
    if args.input is not None or args.output is not None:
        return _stream(args)
    if args.gold is None:
        raise ValueError("give --gold FILE (and --pred NAME=FILE per model), or --input FILE --output FILE to "
                         "stream records")
    if args.resume or args.column or args.id_column or args.chunk_size is not None:
        raise ValueError("--resume, --column, --id-column and --chunk-size belong to the streamed mode "
                         "(--input FILE --output FILE)")
    if args.scheme is not None:
        if args.plot or args.plot_by_type:
            raise ValueError("--plot/--plot-by-type draw entity evaluations (DMBertA, SemEval): leave out --scheme")
        from rapidscore.ner.conll import run_tag_command

        return run_tag_command(args)
    from rapidscore.ner.evaluation import compare
    from rapidscore.ner.records import read_combined_jsonl, read_jsonl

    if args.pred:
        names = [name for name, _ in args.pred]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"model name(s) given twice with --pred: {duplicated}")
        gold = read_jsonl(args.gold)
        predictions = {name: read_jsonl(path) for name, path in args.pred}
    else:
        gold, predictions = read_combined_jsonl(args.gold)
    label_map = _label_map(args)

    result = compare(
        gold, predictions, format=args.format, gold_format=args.gold_format,
        label_similarity=args.label_similarity, label_model=args.label_model, label_map=label_map,
        min_jaccard=args.min_jaccard, min_overlap_percent=args.min_overlap_percent,
        semeval_matching=args.semeval_matching, trim=not args.no_trim,
        on_missing_surface=args.on_missing_surface, progress=show_progress(args), **encoder_options(args),
    )
    if args.plot or args.plot_by_type:
        _plots(args, result)
    if args.json:
        json.dump(result.to_dict(records=True), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if not args.quiet:  # -q: the table only
        _print_repairs(result)
    print(result.table(markdown=True))
    return 0


def _label_map(args: argparse.Namespace) -> dict | None:
    from rapidscore.common.readers import load_json

    if not args.label_map:
        return None
    label_map = load_json(args.label_map)
    if not isinstance(label_map, dict):
        raise ValueError(f"{args.label_map}: the label map must be a JSON object {{label: canonical}}")
    return label_map


def _stream(args: argparse.Namespace) -> int:
    """``--input FILE --output FILE``: one row per record (columns ``gold``, ``predicted`` and
    optionally ``text``, or others named by ``--column``), one row of scores per record out, in
    chunks, resumable; the corpus totals on stderr (``--json``: stdout)."""
    from rapidscore.common.stream_io import stream_metric_file
    from rapidscore.ner.metric import METRIC

    given = [flag for dest, flag in _BATCH_ONLY if getattr(args, dest) not in (None, False, [])]
    if given:
        raise ValueError(f"{', '.join(given)}: not with --input/--output (the streamed mode reads gold and "
                         "predicted entities from one file's columns)")
    if args.input is None or args.output is None:
        raise ValueError("the streamed mode needs both --input FILE and --output FILE ('-': stdout)")
    options = dict(format=args.format, gold_format=args.gold_format, label_similarity=args.label_similarity,
                   label_model=args.label_model, label_map=_label_map(args), min_jaccard=args.min_jaccard,
                   min_overlap_percent=args.min_overlap_percent, semeval_matching=args.semeval_matching,
                   trim=not args.no_trim, on_missing_surface=args.on_missing_surface, **encoder_options(args))
    stream_metric_file(METRIC, lambda: METRIC.build(**options), args, {})
    return 0


def _plots(args: argparse.Namespace, result) -> None:
    """``--plot``, ``--plot-by-type`` (docs/ner.md, "Figures")."""
    from rapidscore.ner.plot import plot_ner_by_type, plot_ner_scores

    if args.plot:
        plot_ner_scores(result, args.plot, option="--plot")
    if args.plot_by_type:
        plot_ner_by_type(result, args.plot_by_type, option="--plot-by-type")


def _print_repairs(result) -> None:
    first = next(iter(result.values()))
    gold_repairs = first.repairs["gold"]
    print(f"{first.n_records} records; gold repairs: {gold_repairs['trimmed']} trimmed, "
          f"{gold_repairs['reanchored']} re-anchored, {gold_repairs['duplicates']} duplicates, "
          f"{gold_repairs['dropped']} dropped")
    for name, res in result.items():
        rep = res.repairs["pred"]
        if rep["trimmed"] or rep["reanchored"] or rep["duplicates"] or rep["dropped"]:
            print(f"{name} repairs: {rep['trimmed']} trimmed, {rep['reanchored']} re-anchored, "
                  f"{rep['duplicates']} duplicates, {rep['dropped']} dropped")
    print()

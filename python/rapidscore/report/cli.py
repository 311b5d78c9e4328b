"""``rapidscore report``: one self-contained HTML page of an evaluation run.

Examples::

    rapidscore report a.json b.json c.json nrr.json ner.json examples/abstention/results --out report.html
    rapidscore report a.json b.json --candidates a=cands_a.txt --candidates b=cands_b.txt \\
        --references refs.txt --model sentence-transformers/all-MiniLM-L6-v2 --out report.html

Each RESULTS file is what a command wrote (``bertscore --json`` or ``--output``, ``nrr --json``
or ``--output``, ``ner --json``, a metric's ``--output`` rows or ``--json`` totals,
``abstention --json``), its kind told from its fields; a SELECT results folder is evaluated as
``rapidscore abstention FOLDER`` does. The page goes through the output layer: never over an
input, and written only when the whole run succeeds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from rapidscore.common.cli_options import add_common_options, positive_int
from rapidscore.common.file_options import input_option, model_option, output_option


def _named(value: str) -> tuple[str, str]:
    """``FILE=NAME`` (``--name``)."""
    path, sep, name = value.rpartition("=")
    if not sep or not path.strip() or not name.strip():
        raise argparse.ArgumentTypeError(f"expected FILE=NAME, got {value!r}")
    return path.strip(), name.strip()


def _for_result(value: str) -> tuple[str | None, str]:
    """``[RESULT=]FILE``: (the result's file or system name, or None for all; the file)."""
    result, sep, path = value.partition("=")
    if sep and result.strip() and path.strip():
        return result.strip(), path.strip()
    if not value.strip():
        raise argparse.ArgumentTypeError("expected [RESULT=]FILE, got an empty value")
    return None, value.strip()


def _align(value: str) -> str | int:
    if value in ("worst", "best"):
        return value
    try:
        line = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected worst, best or a line number, got {value!r}") from None
    if line < 1:
        raise argparse.ArgumentTypeError(f"a line number is 1 or more, got {value}")
    return line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument(
        "results", nargs="+", metavar="RESULTS",
        help="result files (JSON/JSONL/CSV/Parquet that rapidscore bertscore, nrr, ner, abstention or a metric "
             "command wrote; the kind is read from the fields) or SELECT results folders"), directory=True)
    output_option(parser.add_argument("--out", "-o", required=True, metavar="FILE",
                                      help="the HTML page to write (self-contained: opens from the file)"))
    parser.add_argument("--name", action="append", type=_named, default=[], metavar="FILE=NAME",
                        help="the system name of a result file (default: its file name without extensions)")
    input_option(parser.add_argument(
        "--candidates", action="append", type=_for_result, default=[], metavar="[RESULT=]FILE",
        help="the texts of a result's items (candidates, generated answers, responses): one per line, or "
             "--column of a table; RESULT is the result's file or system name (may be left out when one "
             "result has items)"), paths=lambda value: [value[1]])
    input_option(parser.add_argument(
        "--references", action="append", type=_for_result, default=[], metavar="[RESULT=]FILE",
        help="reference texts of a BERTScore or NRR result (repeat for several references per item); "
             "without RESULT=: of every BERTScore and NRR result given no references of its own"),
        paths=lambda value: [value[1]])
    parser.add_argument("--column", default=None, help="the texts' column in .jsonl/.csv/.parquet --candidates files")
    parser.add_argument("--reference-column", default=None,
                        help="the references' column in .jsonl/.csv/.parquet --references files")
    input_option(parser.add_argument("--gold", default=None, metavar="FILE",
                                     help="NER gold JSONL: shows each record's text ('text' or 'prompt') by id"))
    input_option(parser.add_argument("--taxonomy", default=None, metavar="PATH",
                                     help="taxonomy of the SELECT results folders (default: the nearest "
                                          "taxonomy.json, as rapidscore abstention finds it)"), settings=True)
    parser.add_argument("--items", type=positive_int, default=3, metavar="N",
                        help="the N worst and N best items of each system (default 3; every item when at most 2N)")
    model_option(parser.add_argument("--model", "-m", default=None,
                        help="BERTScore: show the token alignment of one pair per system, embedded with this model "
                             "(hub id or directory; the one in the result's signature)"))
    parser.add_argument("--layer", "-l", type=int, default=None,
                        help="with --model: the layer (default: the layer in the result's signature)")
    parser.add_argument("--align", type=_align, default="worst", metavar="worst|best|LINE",
                        help="with --model: the pair to align, by F1 or its line (default worst)")
    parser.add_argument("--title", default="rapidscore report", help="the page's title")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the system the others are compared with, in each metric that has it (default: each "
                             "metric's first system); as rapidscore compare")
    parser.add_argument("--resamples", type=positive_int, default=10_000, metavar="N",
                        help="bootstrap resamples and randomization trials of the intervals and p-values "
                             "(default 10000)")
    parser.add_argument("--seed", type=int, default=12345, help="the resamples' seed (default 12345)")
    add_common_options(parser, progress_default=False,
                       json_help="print what the page holds (files, kinds, systems, signatures) as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from rapidscore._version import __version__
    from rapidscore.common.outputs import open_output
    from rapidscore.report.comparisons import compare_runs
    from rapidscore.report.html import Page, render_page
    from rapidscore.report.inputs import NERRun, read_gold_texts, read_results

    names = _check_names(args)
    runs = read_results(args.results, names, taxonomy=args.taxonomy)
    notes: list[str] = []
    _attach_all_texts(args, runs)
    if args.gold:
        gold = read_gold_texts(args.gold)
        for run in runs:
            if isinstance(run, NERRun):
                run.texts = gold
    if args.model:
        _align_pairs(args, runs, notes)
    elif args.layer is not None or args.align != "worst":
        raise ValueError("--layer and --align choose the token alignment: give --model too")
    if args.seed < 0:
        raise ValueError(f"--seed: expected a non-negative integer, got {args.seed}")
    comparisons = compare_runs(runs, baseline=args.baseline, resamples=args.resamples, seed=args.seed)
    notes += [f"{section}: no pairwise comparison: {why}" for section, why in comparisons.refused.items()]
    page = Page(runs, title=args.title, items=args.items, notes=notes, version=__version__, comparisons=comparisons)
    page.figures = _figures(runs, notes, comparisons)
    text = render_page(page)
    with open_output(args.out, "--out") as handle:
        handle.write(text)
    for note in notes:
        if not args.quiet:
            print(f"rapidscore report: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"out": args.out, "results": [
            {"file": run.path, "kind": run.kind, "system": run.name, "signature": run.signature} for run in runs],
            "comparisons": {section: result.to_dict() for section, result in comparisons.results.items()},
            "notes": notes}, indent=1))
    elif not args.quiet:
        print(f"rapidscore report: wrote {args.out} ({len(runs)} system{'s' if len(runs) != 1 else ''})",
              file=sys.stderr)
    return 0


def _check_names(args: argparse.Namespace) -> dict[str, str]:
    import os

    names = dict(args.name)
    for path in names:
        if not any(os.path.abspath(path) == os.path.abspath(r) or
                   (os.path.exists(path) and os.path.exists(r) and os.path.samefile(path, r)) for r in args.results):
            raise ValueError(f"--name {path}=...: {path} is not one of the RESULTS")
    return names


def _match(runs: list, result: str, option: str, kinds: tuple[str, ...]) -> list:
    import os

    found = [run for run in runs if run.kind in kinds and (
        run.name == result or os.path.abspath(run.path) == os.path.abspath(result) or
        (os.path.exists(result) and os.path.exists(run.path) and os.path.samefile(run.path, result)))]
    if not found:
        raise ValueError(f"{option} {result}=...: no {' or '.join(kinds)} result of that file or system name "
                         f"(systems: {', '.join(run.name for run in runs if run.kind in kinds) or 'none'})")
    return found


def _attach_all_texts(args: argparse.Namespace, runs: list) -> None:
    from rapidscore.report.inputs import attach_texts

    with_items = ("bertscore", "nrr", "metric")
    item_runs = [run for run in runs if run.kind in with_items and (run.kind != "metric" or run.rows is not None)]
    candidates: dict[int, str] = {}
    for result, path in args.candidates:
        if result is None:
            if len(item_runs) != 1:
                raise ValueError(f"--candidates {path}: {len(item_runs)} results have items; say whose: "
                                 "--candidates RESULT=FILE")
            targets = item_runs
        else:
            targets = _match(item_runs, result, "--candidates", with_items)
        for run in targets:
            candidates[id(run)] = path
    shared = [path for result, path in args.references if result is None]
    own: dict[int, list[str]] = {}
    for result, path in args.references:
        if result is not None:
            for run in _match(runs, result, "--references", ("bertscore", "nrr")):
                own.setdefault(id(run), []).append(path)
    for run in item_runs:
        refs = own.get(id(run), shared if run.kind in ("bertscore", "nrr") else [])
        if id(run) in candidates or refs:
            attach_texts(run, candidates.get(id(run)), refs, column=args.column,
                         reference_column=args.reference_column)


def _align_pairs(args: argparse.Namespace, runs: list, notes: list[str]) -> None:
    """The token alignment of one pair per BERTScore system with texts (``--model``)."""
    import math

    from rapidscore.bertscore import BERTScore
    from rapidscore.common.cli_options import encoder_options
    from rapidscore.report.alignment import align_pair
    from rapidscore.report.inputs import signature_field

    scorers: dict = {}
    for run in runs:
        if run.kind != "bertscore":
            continue
        if run.candidates is None or run.references is None:
            notes.append(f"{run.name}: no token alignment without its texts (--candidates, --references)")
            continue
        position = _chosen(run, args.align)
        layer = args.layer
        if layer is None and signature_field(run.signature, "layer") not in (None, "all"):
            layer = int(signature_field(run.signature, "layer") or 0)
        if layer not in scorers:
            scorers[layer] = BERTScore(model=args.model, layer=layer, **encoder_options(args))
        scorer = scorers[layer]
        pairs = [align_pair(scorer, run.candidates[position], ref, run.lines[position])
                 for ref in run.references[position]]
        run.alignment = max(pairs, key=lambda a: -math.inf if math.isnan(a.f1) else a.f1)  # the best reference
        used, scored = signature_field(scorer.signature, "model"), signature_field(run.signature, "model")
        if scored is not None and used is not None and not _same_model(used, scored):
            notes.append(f"{run.name}: scored with {scored}; the token alignment uses {used}")


def _same_model(a: str, b: str) -> bool:
    """Whether two model names (hub ids or directories) are one model: the same name, the embedded
    model however named, or one directory."""
    import os

    from rapidscore.encoder.model_source import is_embedded_model

    if a == b or (is_embedded_model(a) and is_embedded_model(b)):
        return True
    return os.path.isdir(a) and os.path.isdir(b) and os.path.samefile(a, b)


def _chosen(run, align: str | int) -> int:
    """The position of the item ``--align`` names in ``run``."""
    import math

    if align in ("worst", "best"):
        finite = [i for i, v in enumerate(run.f1) if not math.isnan(v)]
        if not finite:
            raise ValueError(f"{run.path}: no F1 to choose a pair by")
        pick = min if align == "worst" else max
        return pick(finite, key=lambda i: run.f1[i])
    if align not in run.lines:
        raise ValueError(f"--align {align}: {run.path} has no line {align} (lines {run.lines[0]}..{run.lines[-1]})")
    return run.lines.index(align)


def _figures(runs: list, notes: list[str], comparisons: Any = None) -> dict[str, str]:
    """SVG by key (``bertscore``, ``nrr-<system>``, ``ner``, ``select-<run>-<experiment>``,
    ``<section>-intervals``); a figure that cannot be drawn is a note instead."""
    from rapidscore.report import figures
    from rapidscore.report.html import select_key, slug

    wanted: list[tuple[str, Callable[[], str]]] = []
    bertscore = [(run.name, run.f1) for run in runs if run.kind == "bertscore"]
    if bertscore:
        wanted.append(("bertscore", lambda: figures.bertscore_figure(bertscore)))
    for run in runs:
        if run.kind == "nrr" and run.threshold is not None:  # streamed rows record no threshold
            wanted.append((f"nrr-{slug(run.name)}", partial(figures.nrr_figure, run.name, run.similarities,
                                                             run.threshold, run.rate)))
    ner = [(run.name, run.result) for run in runs if run.kind == "ner"]
    if ner:
        wanted.append(("ner", lambda: figures.ner_figure(ner)))
    for run in runs:
        if run.kind != "select":
            continue
        experiments = run.document["experiments"]
        for exp in experiments:
            name = exp.get("name", ".")
            rows = [r for r in run.document["rows"] if r.get("experiment", ".") == name or len(experiments) == 1]
            title = run.name if name == "." else f"{run.name}: {name}"
            if rows:
                wanted.append((select_key(run.name, name), partial(figures.select_figure, rows, title)))
    labels = {"bertscore": "Mean F1", "nrr": "NRR", "ner": "Strict F1"}
    for section, result in (comparisons.results.items() if comparisons is not None else ()):
        wanted.append((f"{section}-intervals", partial(figures.interval_figure, result,
                                                       labels.get(section, f"Mean {result.metric}"))))
    made: dict[str, str] = {}
    for k, (key, draw) in enumerate(wanted):
        try:
            made[key] = figures.scoped_svg(draw(), f"fig{k}")
        except figures.FiguresUnavailable as exc:
            if f"no figures: {exc}" not in notes:
                notes.append(f"no figures: {exc}")
    return made

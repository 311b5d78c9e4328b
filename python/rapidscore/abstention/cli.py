"""``rapidscore abstention``: summarise SELECT results (one experiment, a whole results folder with
atomic and composition experiments, or a flat table) into the paper's tables (rows models,
columns techniques, "mean +- half-width" percentages)."""

from __future__ import annotations

import argparse
import sys

from rapidscore.common.cli_options import add_common_options, encoder_options, non_negative_int, show_progress
from rapidscore.common.file_options import input_option, model_option, output_option

FORMATS = ("text", "markdown", "latex", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument("results", help="a results folder: every experiment under it "
                        "({experiment}/{model}/{eval_type}/{technique}.json.gz, atomic and compositions) is "
                        "reported; or a flat table (.jsonl, .csv, .tsv, .json, .parquet; .gz too)"),
                 directory=True)
    input_option(parser.add_argument("--taxonomy", action="append", metavar="[EXPERIMENT=]PATH",
                        help="taxonomy.json / edge-list .csv (checks concepts, skips leaves for generalization, "
                        "enables --levels). PATH applies to every experiment, EXPERIMENT=PATH to one (repeat the "
                        "option); by default each experiment gets the nearest taxonomy_plus.json, else "
                        "taxonomy.json (in its folder or a parent, or a parent's data/, data/SELECT/atoms/ or, "
                        "for a compositions experiment, data/SELECT/compositions/: SELECT's release)"),
                 settings=True, paths=lambda value: [value.partition("=")[2] or value])
    parser.add_argument("--method", default="heuristic",
                        help="refusal detector: heuristic (default), phrase, keyword, phr+kw, arditi, xstest, "
                        "embedding, classifier (with --model); a record's stored flag for a SELECT method is used when "
                        "it has one (SELECT's pipeline) unless --recompute; 'stored:<name>' uses stored flags only")
    model_option(parser.add_argument("--model", help="--method classifier: the sequence classifier (a directory, or "
                        "a hub id already downloaded); --method embedding: its encoder (default: all-MiniLM-L6-v2)"))
    parser.add_argument("--refusal-label", help="--method classifier: the label meaning refusal (default: the one "
                        "named like refusal/rejection/refuse/reject/abstain)")
    parser.add_argument("--recompute", action="store_true",
                        help="run the detector on every response, ignoring stored flags (counts disagreements)")
    parser.add_argument("--check-stored", action="store_true",
                        help="keep stored flags but also run the detector where one exists, to count disagreements")
    parser.add_argument("--models", nargs="*", help="only these models (folder names)")
    parser.add_argument("--techniques", nargs="*", help="only these techniques (file names)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="--json = --format json")
    input_option(parser.add_argument(
        "--names", help="display names: JSON {folder: name} (or {models: .., techniques: ..}) or CSV name,display; "
        "names not listed are derived (google--gemma-2-2b-it -> Gemma-2-2B-IT)"), settings=True)
    parser.add_argument("--raw-names", action="store_true", help="show folder names as they are")
    output_option(parser.add_argument("--output", "-o", help="write the table here instead of stdout"))
    parser.add_argument("--levels", action="store_true", help="also print the breakdown by taxonomy depth")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="skip malformed records / empty seeds (counts are reported) instead of failing")
    parser.add_argument("--workers", type=non_negative_int, default=0,
                        help="processes reading and deciding results files (0 = one per CPU, 1 = none)")
    output_option(parser.add_argument("--plot-dir", help="write the figures here ([plot] extra): rates per model "
                                                         "and technique, per-level trends, correlation heatmaps"),
                  directory=True)
    parser.add_argument("--plot-format", choices=("png", "svg", "pdf"), default="png",
                        help="with --plot-dir: PNG (default) or vector SVG / PDF")
    # --backend/--device/--precision: the encoder of --method embedding
    add_common_options(parser, json_help="same as --format json")


def _taxonomy_map(values: list[str] | None) -> dict[str, str | None]:
    mapping: dict[str, str | None] = {}
    for value in values or []:
        name, sep, path = value.partition("=")
        if sep and name and path:
            mapping[name.strip("/")] = path
        else:
            if "*" in mapping:
                raise ValueError(f"--taxonomy {value!r}: only one taxonomy without EXPERIMENT= may be given")
            mapping["*"] = value
    return mapping


def _detector(args):
    from rapidscore.abstention.detectors import SELECT_METHODS, get_detector

    if args.method.startswith("stored:"):
        if args.recompute:
            raise ValueError("--recompute needs a detector, not stored:<name>")
        return args.method.split(":", 1)[1], None
    if args.method in SELECT_METHODS:
        kwargs = {"num_threads": args.threads}
    elif args.method in ("embedding", "classifier"):
        kwargs = encoder_options(args)  # backend, device, precision and --threads as num_threads
        if args.model is not None:
            kwargs["model"] = args.model
        if args.method == "classifier" and args.refusal_label is not None:
            kwargs["refusal_label"] = args.refusal_label
    else:
        kwargs = {}
    if args.method not in ("embedding", "classifier") and (args.model or args.refusal_label):
        raise ValueError(f"--model and --refusal-label apply to --method classifier (and --model to embedding), "
                         f"not {args.method!r}")
    return args.method, get_detector(args.method, **kwargs)


# where find_taxonomy looked (rapidscore.abstention.pipeline.taxonomy_search_places)
_NO_TAXONOMY = ("none found (looked for taxonomy_plus.json, taxonomy.json, taxonomy.csv in the experiment's folder "
                "and each parent up to the results folder's parent, and in their data/SELECT/atoms/ (compositions/ "
                "for a compositions experiment), data/atoms/ and data/; give one with --taxonomy)")


def _note(args, message: str) -> None:
    if not args.quiet:
        print(f"rapidscore abstention: {message}", file=sys.stderr)


def _decision_note(args, name: str, stats, detector_name: str) -> None:
    label = "" if name == "." else f"{name}: "
    parts = [f"{stats.stored:,} stored flag(s) used", f"{stats.computed:,} decided by {detector_name}"]
    if stats.compared:
        share = 100.0 * stats.disagree / stats.compared
        parts.append(f"detector and stored flag disagree on {stats.disagree:,} of {stats.compared:,} ({share:.2f}%)")
    _note(args, label + ", ".join(parts))
    if args.recompute and stats.disagree:
        _note(args, f"{label}--recompute: these numbers differ from SELECT's pipeline, which uses the stored "
                    "flags (run without --recompute to reproduce the paper)")


def run(args: argparse.Namespace) -> int:
    import os

    from rapidscore.abstention import names as display
    from rapidscore.abstention import rates, report
    from rapidscore.abstention.pipeline import DecisionStats, evaluate, find_experiments
    from rapidscore.abstention.results import load_flat_table
    from rapidscore.abstention.taxonomy import Taxonomy
    from rapidscore.common.file_run import note_input
    from rapidscore.common.outputs import open_output

    on_error = "skip" if args.skip_malformed else "raise"
    progress = show_progress(args)
    output_format = "json" if args.json else args.format
    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {args.workers}")
    method, detector = _detector(args)
    detector_name = getattr(detector, "name", method)
    taxonomies = _taxonomy_map(args.taxonomy)
    # the taxonomies named on the command line are read before any results file: a typo fails at once
    given_taxonomies = {path: Taxonomy.load(path) for path in dict.fromkeys(taxonomies.values()) if path}

    # each item: (name, taxonomy path, group counts, decision stats, per-cell stats, skipped)
    evaluated = []
    if os.path.isdir(args.results):
        experiments_found = find_experiments(args.results, models=args.models, techniques=args.techniques,
                                             taxonomies=taxonomies)
        # read by worker processes: the run learns of them here (no output may replace one)
        for path in [f.path for exp in experiments_found for f in exp.files] + \
                [exp.taxonomy for exp in experiments_found if exp.taxonomy]:
            note_input(path)
        for exp in experiments_found:
            result = evaluate(exp.files, detector, method=method, recompute=args.recompute,
                              check_stored=args.check_stored, on_error=on_error, workers=args.workers,
                              progress=progress)
            evaluated.append((exp.name, exp.taxonomy, result.counts, result.stats, result.cell_stats,
                              result.skipped))
    else:
        if not os.path.exists(args.results):
            raise FileNotFoundError(f"{args.results!r} does not exist")
        loaded = load_flat_table(args.results, on_error=on_error)
        if not loaded.records:
            raise ValueError(f"{args.results}: no records to evaluate")
        if detector is None:
            raise ValueError(f"{args.results}: a flat table has no stored flags; use a detector, not {args.method}")
        refused = detector([r.response for r in loaded.records])
        stats = DecisionStats(computed=len(loaded.records))
        evaluated.append((".", taxonomies.get("*"), rates.group_counts(loaded.records, refused), stats, {},
                          loaded.skipped))

    names = display.Names({} if args.names is None else display.load_names(args.names), derive=not args.raw_names)
    experiments, extra_text = [], ""
    for name, taxonomy_path, counts, stats, cell_stats, skipped in evaluated:
        label = "" if name == "." else f"{name}: "
        if skipped:
            details = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
            _note(args, f"{label}skipped {sum(skipped.values())} record(s)/group(s): {details}")
        _decision_note(args, name, stats, detector_name)
        taxonomy: Taxonomy | None = None
        if taxonomy_path in given_taxonomies:
            taxonomy = given_taxonomies[taxonomy_path]
        elif taxonomy_path:
            taxonomy = Taxonomy.load(taxonomy_path)
        if len(evaluated) > 1 or taxonomy_path:
            _note(args, f"{label}taxonomy {taxonomy_path or _NO_TAXONOMY}")
        scores = rates.concept_scores_from_counts(counts, taxonomy=taxonomy)
        summary = rates.summarize_scores(scores)
        source = None if taxonomy is None else os.path.basename(str(taxonomy.source))
        decisions = "stored" if detector is None else ("recompute" if args.recompute else "stored-first")
        signature = report.abstention_signature(args.method, taxonomy=source, detector=detector, decisions=decisions)
        experiments.append(report.ExperimentReport(
            name, summary, taxonomy_path, stats.as_dict(),
            {"/".join(k): s.as_dict() for k, s in sorted(cell_stats.items())}, signature))
        if output_format == "text":
            extra_text += _breakdowns(args, label, scores, taxonomy, names, counts)
        if args.plot_dir:
            _plots(args.plot_dir, scores, taxonomy, prefix="" if name == "." else name.replace("/", "_") + "_",
                   names=names, fmt=args.plot_format)

    meta = {"results": args.results, "method": args.method, "recompute": args.recompute}
    signatures = {e.signature for e in experiments}
    if len(signatures) == 1:  # one experiment (or all alike): the signature at the top, as before
        meta["signature"] = signatures.pop()
    text = report.render(experiments, output_format, names=names, meta=meta) + extra_text
    if args.output:
        with open_output(args.output, "--output") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _breakdowns(args, label: str, scores, taxonomy, names, counts=None) -> str:
    from rapidscore.abstention import rates

    text = ""
    for (model, technique, eval_type), groups in sorted(rates.by_relation_scores(scores).items()):
        text += f"\n{label}{names.model(model)} / {names.technique(technique)} / {eval_type} by relation (%):\n"
        text += "".join(f"  {rel}: {agg.as_percent()}\n" for rel, agg in groups.items())
    if args.levels:
        if taxonomy is None:
            raise ValueError("--levels needs a taxonomy (--taxonomy, or a taxonomy.json beside the results)")
        responses = _level_responses(counts, scores, taxonomy)
        for (model, technique, eval_type), levels in sorted(rates.by_level_scores(scores, taxonomy).items()):
            text += f"\n{label}{names.model(model)} / {names.technique(technique)} / {eval_type} by depth (%):\n"
            cell = responses.get((model, technique, eval_type), {})
            text += "".join(_level_line(d, agg, cell.get(d), eval_type) for d, agg in levels.items())
    return text


def _level_responses(counts, scores, taxonomy) -> dict:
    """{(model, technique, eval_type): {depth: (refused, responses)}} over the concepts the scores
    keep (generalization skips leaves), from the group counts in one pass; empty without counts."""
    out: dict = {}
    depths: dict = {}
    for (model, technique, eval_type, relation, concept, _seed), (k, n) in (counts or {}).items():
        key = (model, technique, eval_type)
        if relation is not None or (None, concept) not in scores.get(key, {}):
            continue
        if concept not in depths:
            depths[concept] = taxonomy.depth(concept)
        cell = out.setdefault(key, {})
        refused, total = cell.get(depths[concept], (0, 0))
        cell[depths[concept]] = (refused + k, total + n)
    return out


def _level_line(depth, agg, responses, eval_type: str) -> str:
    """``  depth 0: 66.7% [20.8, 93.9] (n=3 concepts; 16 of 24 responses refused)``: the mean over
    concepts with its 95% Wilson score interval (n = concepts)."""
    from rapidscore.abstention.plots import rate_interval

    if agg.n == 0:
        return f"  depth {depth}: - (n=0 concepts)\n"
    mean, low, high = rate_interval(agg)
    counted = ""
    if responses is not None:
        refused, total = responses
        counted = (f"; {total - refused} of {total} responses answered" if eval_type == "specificity"
                   else f"; {refused} of {total} responses refused")
    return f"  depth {depth}: {mean:.1f}% [{low:.1f}, {high:.1f}] (n={agg.n} concepts{counted})\n"


def _plots(plot_dir: str, scores, taxonomy, prefix: str, names=None, fmt: str = "png") -> None:
    """The figures of one experiment (see docs/abstention.md, "Figures"): ``{prefix}rates``,
    ``{prefix}{model}_levels`` (with a taxonomy), ``{prefix}{model}_{eval_type}_correlation``."""
    import os

    from rapidscore.abstention import plots, rates

    os.makedirs(plot_dir, exist_ok=True)

    def target(name: str) -> str:
        return os.path.join(plot_dir, f"{prefix}{name}.{fmt}")

    shown = names.model if names is not None else (lambda m: m)
    summary = rates.summarize_scores(scores)
    if any(metric in cell for cell in summary.values() for metric in plots.RATE_METRICS):
        plots.plot_rates(summary, target("rates"), names=names)
    levels = rates.by_level_scores(scores, taxonomy) if taxonomy is not None else {}
    for model in sorted({m for m, _t, _e in scores}):
        if any(m == model and by_depth for (m, _t, _e), by_depth in levels.items()):
            plots.plot_levels(levels, model, target(f"{model}_levels"), names=names)
        for eval_type in sorted({e for m, _t, e in scores if m == model}):
            techniques, matrix = rates.technique_correlations(scores, model, eval_type)
            plots.plot_correlations(techniques, matrix, f"{shown(model)}, {eval_type}: Spearman correlation "
                                    "between techniques over concepts", target(f"{model}_{eval_type}_correlation"),
                                    names=names)

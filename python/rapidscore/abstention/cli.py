"""``rapidscore abstention``: summarise a SELECT results tree (or a flat table) into the paper's
table (rows models, columns techniques, "mean +- half-width" percentages)."""

from __future__ import annotations

import argparse
import sys

from rapidscore.common.cli_options import add_common_options, encoder_options, show_progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="results tree {model}/{eval_type}/{technique}.json.gz, "
                        "or a flat table (.jsonl / .csv)")
    parser.add_argument("--taxonomy", help="taxonomy.json / edge-list .csv (checks concepts, "
                        "skips leaves for generalization, enables --levels and per-level plots)")
    parser.add_argument("--method", default="heuristic",
                        help="refusal detector: heuristic (default), phrase, keyword, phr+kw, arditi, "
                        "xstest, embedding, or 'stored:<name>' to use the flags stored in SELECT files")
    parser.add_argument("--models", nargs="*", help="only these models")
    parser.add_argument("--techniques", nargs="*", help="only these techniques")
    parser.add_argument("--format", choices=("text", "json", "csv"), default="text", help="--json = --format json")
    parser.add_argument("--output", "-o", help="write the table here instead of stdout")
    parser.add_argument("--levels", action="store_true", help="also print the breakdown by taxonomy depth")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="skip malformed records / empty seeds (counts are reported) instead of failing")
    parser.add_argument("--plot-dir", help="write per-level trend and correlation heatmap PNGs here ([plot] extra)")
    # --backend/--device/--precision: the encoder of --method embedding
    add_common_options(parser, threads_default=0, json_help="same as --format json")


def run(args: argparse.Namespace) -> int:
    import os

    import numpy as np

    from rapidscore.abstention import metrics, report
    from rapidscore.abstention.detectors import SelectDetector, get_detector
    from rapidscore.abstention.results import load_flat_table, load_results_tree
    from rapidscore.abstention.taxonomy import Taxonomy

    if args.plot_dir and os.path.exists(args.plot_dir) and not os.path.isdir(args.plot_dir):
        raise NotADirectoryError(f"--plot-dir {args.plot_dir} exists and is not a directory")
    on_error = "skip" if args.skip_malformed else "raise"
    progress = show_progress(args)
    output_format = "json" if args.json else args.format
    if os.path.isdir(args.results):
        loaded = load_results_tree(args.results, models=args.models, techniques=args.techniques,
                                   on_error=on_error, progress=progress)
    else:
        if not os.path.exists(args.results):
            raise FileNotFoundError(f"{args.results!r} does not exist")
        loaded = load_flat_table(args.results, on_error=on_error)
    records = loaded.records
    if loaded.n_skipped and not args.quiet:
        details = ", ".join(f"{n} {reason}" for reason, n in sorted(loaded.skipped.items()))
        print(f"rapidscore abstention: skipped {loaded.n_skipped} record(s)/group(s): {details}", file=sys.stderr)
    if not records:
        raise ValueError(f"{args.results}: no records to evaluate")
    taxonomy = Taxonomy.load(args.taxonomy) if args.taxonomy else None

    if args.method.startswith("stored:"):
        name = args.method.split(":", 1)[1]
        missing = [r for r in records if not r.stored_refusal or name not in r.stored_refusal]
        if missing:
            r = missing[0]
            raise ValueError(f"{len(missing)} record(s) lack a stored '{name}' flag, e.g. {r.model}/{r.eval_type}/"
                             f"{r.technique} seed {r.seed} concept {r.concept} id {r.instance_id}")
        refused = np.array([bool(r.stored_refusal[name]) for r in records
                            if r.stored_refusal is not None])  # all of them: checked above
        detector = None
    else:
        if args.method in ("phrase", "keyword", "phr+kw", "heuristic"):
            kwargs = {"n_threads": args.threads}
        elif args.method == "embedding":
            kwargs = {"encoder_options": encoder_options(args)}
        else:
            kwargs = {}
        detector = get_detector(args.method, **kwargs)
        responses = [r.response for r in records]
        if progress and len(responses) > 20000 and not isinstance(detector, SelectDetector):
            from tqdm import tqdm

            refused = np.concatenate([detector(responses[i:i + 5000]) for i in
                                      tqdm(range(0, len(responses), 5000), desc="detecting", file=sys.stderr)])
        else:
            refused = detector(responses)

    meta = {"results": args.results, "method": args.method, "records": len(records),
            "skipped": loaded.skipped, "taxonomy": args.taxonomy}
    result = report.build_report(records, refused, taxonomy=taxonomy, method=args.method, detector=detector,
                                 meta=meta)
    summary = result.summary
    if output_format == "json":
        text = report.to_json(summary, {**meta, "signature": result.signature})
    elif output_format == "csv":
        text = report.to_csv(summary)
    else:
        text = report.to_text(summary)
        relations = metrics.by_relation(records, refused)
        for (model, technique, eval_type), groups in sorted(relations.items()):
            text += f"\n{model} / {technique} / {eval_type} by relation (%):\n"
            text += "".join(f"  {rel}: {agg.as_percent()}\n" for rel, agg in groups.items())
        if args.levels:
            if taxonomy is None:
                raise ValueError("--levels needs --taxonomy")
            for (model, technique, eval_type), levels in sorted(metrics.by_level(records, refused, taxonomy).items()):
                text += f"\n{model} / {technique} / {eval_type} by depth (%):\n"
                text += "".join(f"  depth {d}: {agg.as_percent()} (n={agg.n})\n" for d, agg in levels.items())
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)

    if args.plot_dir:
        from rapidscore.abstention import plots

        os.makedirs(args.plot_dir, exist_ok=True)
        scores = metrics.concept_scores(records, refused, taxonomy=taxonomy)
        models = sorted({m for m, _t, _e in scores})
        for model in models:
            if taxonomy is not None:
                plots.plot_levels(metrics.by_level(records, refused, taxonomy), model,
                                  os.path.join(args.plot_dir, f"{model}_levels.png"))
            for eval_type in sorted({e for m, _t, e in scores if m == model}):
                techniques, matrix = metrics.technique_correlations(scores, model, eval_type)
                plots.plot_correlations(techniques, matrix, f"{model} {eval_type}",
                                        os.path.join(args.plot_dir, f"{model}_{eval_type}_correlation.png"))
    return 0

"""``rapidscore bertscore``: the reference CLI's flags plus JSON output, tables and plots."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from rapidscore.common.cli_options import (
    add_common_options,
    add_long_texts_option,
    non_negative_int,
    positive_float,
    positive_int,
    print_table,
    run_only,
    show_progress,
)
from rapidscore.common.file_options import input_option, model_option, output_option
from rapidscore.common.stream_io import add_stream_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument(
        "-c", "--cand", help="candidate file (one sentence per line, or .jsonl/.json/.csv/.tsv/.parquet with "
        "--column; .gz too) or a single candidate string"), text=True)
    input_option(parser.add_argument(
        "-r", "--ref", nargs="+", action="extend", help="reference file(s) (several files = several references "
        "per candidate) or a single reference string"), text=True)
    parser.add_argument("--column", default=None,
                        help="column/key holding the text in .jsonl/.json/.csv/.tsv/.parquet inputs")
    parser.add_argument("--lang", default=None,
                        help="language code; without -m, picks the reference's model (en -> roberta-large, "
                             "downloaded once); with -m, the language of its baseline. The embedded model "
                             "needs no --lang: --rescale_with_baseline uses its English baseline")
    model_option(parser.add_argument("-m", "--model", default=None, help="model hub id or directory "
                        "(default: the embedded all-MiniLM-L6-v2 unless --lang is given; "
                        "-m all-MiniLM-L6-v2 --lang en keeps it)"))
    parser.add_argument("-l", "--num_layers", type=int, default=None, help="layer to use (default: tuned layer)")
    parser.add_argument("-b", "--batch_size", type=non_negative_int, default=64,
                        help="the reference's batch size, whose zero padding the scores reproduce so that they "
                             "equal the reference CLI's (0: maxima over real tokens only); the encoder batches "
                             "by token budget (--batch-tokens) either way")
    parser.add_argument("--batch-tokens", type=positive_int, default=None,
                        help="padded tokens per encoder batch "
                             "(default: 1024 on CPU in fp32, 2048 in bf16, 16384 on GPU)")
    add_long_texts_option(parser)
    parser.add_argument("--idf", action="store_true",
                        help="idf weighting from the references (with --idf-file: from that file's counts)")
    parser.add_argument("--rescale_with_baseline", action="store_true",
                        help="rescale with the published baseline of the model and --lang (the embedded "
                             "model's: English, no --lang needed)")
    input_option(parser.add_argument("--baseline_path", default=None, help="custom baseline file (LAYER,P,R,F)"),
                 settings=True)
    parser.add_argument("--use_fast_tokenizer", action="store_false",
                        help="compatibility flag of the reference CLI (whose hash marks the fast tokenizer unless "
                             "this flag is given); rapidscore always tokenizes with the Rust tokenizer")
    run_only(parser.add_argument("-s", "--seg_level", action="store_true", help="print P, R, F1 of each pair"))
    run_only(parser.add_argument("--table", action="store_true", help="print a per-candidate table"))
    run_only(parser.add_argument("-v", "--verbose", action="store_true",
                                 help="timings on stderr (progress bars: as every command, when stderr is a "
                                      "terminal; --progress forces them)"))
    parser.add_argument("--show", action="store_true", help="draw the similarity heatmap of the first pair")
    output_option(parser.add_argument("--fname", default="", help="with --show: save the heatmap to this file "
                                                                  "(PNG, or SVG / PDF by the extension)"))
    output_option(parser.add_argument("--plot-f1", default=None, metavar="FILE",
                                      help="save the distribution of the candidates' F1 (violin, box and points; "
                                           "needs matplotlib)"))
    input_option(parser.add_argument("--make-baseline", metavar="CORPUS", default=None,
                                     help="compute a rescale baseline file from a corpus (one sentence per line)"))
    output_option(parser.add_argument("--out", default=None, help="with --make-baseline: output baseline file"))
    parser.add_argument("--pairs", type=int, default=100_000, help="with --make-baseline: random pairs")
    parser.add_argument("--seed", type=int, default=0, help="with --make-baseline: random seed")
    # --nthreads: the reference CLI's spelling of --threads
    add_common_options(parser, threads_aliases=("--nthreads",), json_help="machine-readable output")
    stream = add_stream_arguments(parser)
    stream.add_argument("--candidate-column", default="candidate", help="with --input: the candidates' column")
    stream.add_argument("--reference-column", nargs="+", default=["reference"], metavar="COLUMN",
                        help="with --input: the references' column(s); several columns, or a list in a "
                             "JSONL/Parquet cell, = several references")
    run_only(stream.add_argument("--memory-budget", type=positive_float, default=None, metavar="MIB",
                                 help="MiB of token embeddings per chunk (default 256)"))
    run_only(stream.add_argument("--cache-tokens", type=non_negative_int, default=0, metavar="N",
                                 help="keep the embeddings of recent texts across chunks (an LRU cache of N tokens)"))
    input_option(stream.add_argument("--idf-file", default=None, metavar="FILE",
                                     help="idf document counts to weight with, as written by --write-idf, "
                                          "batch or streamed: implies --idf, and with --idf the file's counts "
                                          "are used (signature idf:file=<sha8>)"), settings=True)
    output_option(stream.add_argument("--write-idf", default=None, metavar="FILE",
                                      help="count the references' documents in one streamed pass and write an "
                                           "idf file"))


def _inputs(args: argparse.Namespace, idf_from_references: bool = False) -> tuple[list[str], list]:
    from rapidscore.common.input_files import missing_file
    from rapidscore.common.readers import parallel_items

    if not args.cand or not args.ref:
        raise ValueError("give candidates with -c and references with -r")
    if os.path.isfile(args.cand):
        for ref_file in args.ref:
            if not os.path.isfile(ref_file):
                raise missing_file(ref_file)
        items = list(parallel_items(args.cand, args.ref, args.column, args.column))
        if not items:  # a mean over no pair is not a score (nrr says the same)
            raise ValueError(f"nothing to evaluate: {args.cand} is empty")
        cands = [cand for cand, _refs, _where in items]
        if len(args.ref) == 1 and all(len(refs) == 1 for _cand, refs, _where in items):
            return cands, [refs[0] for _cand, refs, _where in items]  # one reference per candidate
        return cands, [refs for _cand, refs, _where in items]
    if any(os.path.isfile(r) for r in args.ref):
        raise missing_file(args.cand)
    for text in (args.cand, *args.ref):
        if _looks_like_path(text):  # bert-score scores the string itself: say so
            print(f"rapidscore bertscore: warning: no file {text!r}; scoring it as a sentence", file=sys.stderr)
    if idf_from_references:  # an idf file needs no corpus
        raise ValueError("idf from the references needs more than a single pair of sentences (or give "
                         "--idf-file)")
    return [args.cand], [list(args.ref)]


def _looks_like_path(text: str) -> bool:
    """A one-word string with a file extension or a directory part (``typo.txt``, ``data/c``)."""
    if not text or any(c.isspace() for c in text):
        return False
    return os.sep in text or os.path.splitext(text)[1].lower() in (
        ".txt", ".jsonl", ".json", ".csv", ".tsv", ".parquet", ".gz")


def run(args: argparse.Namespace) -> int:
    from rapidscore.bertscore import compute_baseline
    from rapidscore.common.readers import read_texts

    engine = dict(backend=args.backend, precision=args.precision, device=args.device, num_threads=args.threads,
                  batch_tokens=args.batch_tokens)
    if args.make_baseline:
        if args.long_texts != "truncate":
            raise ValueError("--make-baseline scores the corpus as bert-score does: leave out --long-texts")
        if not args.out:
            raise ValueError("--make-baseline needs --out FILE")
        progress = show_progress(args)  # the one policy of every command (-v no longer needed)
        table = compute_baseline(read_texts(args.make_baseline, args.column), args.model, n_pairs=args.pairs,
                                 seed=args.seed, out_path=args.out, progress=progress, **engine)
        print(f"wrote {len(table)} layer rows to {args.out}")
        return 0
    engine["long_texts"] = args.long_texts
    if args.output or args.input or args.write_idf or args.resume:
        return _run_streaming(args, engine)
    started = time.perf_counter()
    scorer = _scorer(args, progress=show_progress(args), **engine)
    idf = scorer.settings.idf
    loaded = time.perf_counter()
    cands, refs = _inputs(args, idf.kind == "references")
    scoring = time.perf_counter()
    result = scorer.score(cands, refs, reference_batch_size=args.batch_size or None)
    if args.plot_f1:
        from rapidscore.bertscore.plot import plot_f1_distribution

        system = os.path.basename(args.cand) if os.path.isfile(args.cand) else "candidate"
        plot_f1_distribution({system: result}, args.plot_f1)
    if args.verbose and not args.quiet:
        _print_timings(len(cands), loaded - started, time.perf_counter() - scoring)
    if args.json:
        from rapidscore.compare.digests import references_sha256

        # references_sha256: rapidscore compare refuses systems scored against other references
        json.dump({"hash": scorer.hash, "signature": result.signature, "references_sha256": references_sha256(refs),
                   "mean": {"P": result.mean_precision, "R": result.mean_recall, "F1": result.mean_f1},
                   "precision": result.precision.tolist(), "recall": result.recall.tolist(),
                   "f1": result.f1.tolist(), "long_texts": _long_text_counts(scorer, result.details)},
                  sys.stdout, indent=1)
        print()
        return _show_first_pair(args, scorer, cands, refs)
    if scorer.long_texts == "window" and not args.quiet:
        _note_windows(scorer, result.details["windowed"], result.details["windows"], result.details["unique_sentences"])
    print(f"{scorer.hash} P: {result.mean_precision:.6f} R: {result.mean_recall:.6f} F1: {result.mean_f1:.6f}")
    if args.seg_level:
        for p, r, f in zip(result.precision, result.recall, result.f1):
            print(f"{p:.6f}\t{r:.6f}\t{f:.6f}")
    if args.table:
        print_table(["Candidate", "Precision", "Recall", "F1"],
                    ([i, f"{p:.3f}", f"{r:.3f}", f"{f:.3f}"]
                     for i, (p, r, f) in enumerate(zip(result.precision, result.recall, result.f1), start=1)))
    return _show_first_pair(args, scorer, cands, refs)


def _show_first_pair(args: argparse.Namespace, scorer, cands: list[str], refs: list) -> int:
    """--show: the first pair's similarity heatmap, drawn after the scores are printed (a window
    waits for its closing; --fname saves it instead). The command's exit code."""
    if args.show:
        from rapidscore.bertscore.plot import plot_similarity

        first_ref = refs[0] if isinstance(refs[0], str) else refs[0][0]
        plot_similarity(scorer, cands[0], first_ref, fname=args.fname)
    return 0


def _settings(args: argparse.Namespace, **options):
    """The command's settings, resolved once (``rapidscore.bertscore.settings``): --idf-file
    (with or without --idf: the file, read and checked before any model loads), else --idf (the
    references); on the embedded model --rescale_with_baseline needs no --lang (its baseline is
    English); --lang alone picks bert-score's model, as the reference CLI."""
    from rapidscore.bertscore.settings import resolve_settings

    return resolve_settings(args.model, args.num_layers, lang=args.lang, idf=args.idf, idf_file=args.idf_file,
                            rescale_with_baseline=args.rescale_with_baseline, baseline_path=args.baseline_path,
                            use_fast_tokenizer=args.use_fast_tokenizer, **options)


def _scorer(args: argparse.Namespace, **options):
    """The BERTScore of the command's options (``_settings``). A model that cannot be loaded is
    one line naming the embedded model as the offline choice (the drop-in's words); with --lang
    (and no -m) it is explained by the language too: whether bert-score knows it, and which
    model it picks."""
    from rapidscore.bert_score import unavailable_model_message
    from rapidscore.bertscore import BERTScore
    from rapidscore.errors import ModelNotFoundError

    try:
        return BERTScore.from_settings(_settings(args, **options))
    except ModelNotFoundError as exc:
        from rapidscore.bertscore.model_table import describe_language, model_for_language

        by_lang = args.lang is not None and args.model is None
        model = model_for_language(args.lang) if by_lang else args.model
        if args.lang is not None:
            choice = ("leave out --lang (the embedded model is the default, and --rescale_with_baseline needs no "
                      "--lang on it), or -m all-MiniLM-L6-v2 --lang en")
        else:
            choice = "leave out -m (the embedded model is the default), or -m all-MiniLM-L6-v2"
        message = unavailable_model_message(exc, model, offline_choice=choice)
        if by_lang:
            message = f"{describe_language(args.lang)}, which is not available here: {message}"
        raise ModelNotFoundError(message) from exc


def _print_timings(pairs: int, load_seconds: float, score_seconds: float) -> None:
    """-v: where the time went (on stderr: stdout keeps the reference CLI's lines)."""
    rate = f" ({pairs / score_seconds:.1f} pairs/s)" if score_seconds > 0 else ""
    print(f"rapidscore bertscore: model loaded in {load_seconds:.2f} seconds; scored {pairs} "
          f"pair{'s' if pairs != 1 else ''} in {score_seconds:.2f} seconds{rate}", file=sys.stderr)


def _long_text_counts(scorer, details: dict) -> dict:
    """The JSON output's account of texts over the model's maximum length."""
    return {"mode": scorer.long_texts, "max_length": scorer.encoder.max_length,
            "truncated": int(details["truncated"]), "windowed": int(details["windowed"]),
            "windows": int(details["windows"])}


def _note_windows(scorer, windowed: int, windows: int, texts: int | None) -> None:
    """On stderr, before the results (the stdout lines keep the reference CLI's format)."""
    of = f" of {texts} distinct" if texts is not None else ""
    print(f"rapidscore bertscore: {windowed}{of} texts were longer than {scorer.encoder.max_length} tokens: "
          f"embedded in {windows} windows (--long-texts window)", file=sys.stderr)


def _stream_items(args: argparse.Namespace):
    """A function returning a fresh iterator of ``(candidate, [references], id)``: the input is
    read twice when idf needs a first pass."""
    from rapidscore.common.input_files import missing_file
    from rapidscore.common.readers import row_items
    from rapidscore.common.stream_io import file_items

    if args.input:
        if args.cand or args.ref:
            raise ValueError("give either --input or -c/-r files, not both")
        return lambda: row_items(args.input, args.input_format, args.candidate_column, args.reference_column,
                                 args.id_column)
    if not args.cand or not args.ref:
        raise ValueError("streaming needs --input FILE (or '-'), or candidate and reference files with -c/-r")
    if args.id_column:
        raise ValueError("--id-column needs --input")
    for path in (args.cand, *args.ref):
        if path != "-" and not os.path.isfile(path):
            raise missing_file(path)
    return lambda: file_items(args.cand, args.ref, args.column, args.column)


class _Reiterable:
    def __init__(self, make) -> None:
        self.make = make

    def __iter__(self):  # noqa: ANN204
        return ((cand, refs) for cand, refs, _id in self.make())


def _run_streaming(args: argparse.Namespace, engine: dict) -> int:
    import hashlib

    from rapidscore.bertscore.idf_source import IdfSource
    from rapidscore.bertscore.streaming import DEFAULT_CHUNK_PAIRS, ReadCounter, check_stream_batch_size, chunk_results
    from rapidscore.common.file_run import file_sha256
    from rapidscore.common.readers import count_rows
    from rapidscore.common.stream_io import RowIds, run_stream

    if args.make_baseline or args.show:
        raise ValueError("--make-baseline and --show do not stream: leave out --input/--output")
    if args.plot_f1:
        raise ValueError("--plot-f1 needs every score at once: leave out --input/--output")
    if not args.output and not args.write_idf:
        raise ValueError("streaming writes --output FILE (or '-') or --write-idf FILE")
    if args.batch_size:  # refused before the model loads or the output file is made
        check_stream_batch_size(args.batch_size, args.chunk_size or DEFAULT_CHUNK_PAIRS)
    make_items = _stream_items(args)
    started = time.perf_counter()
    scorer = _scorer(args, **engine)
    idf = scorer.settings.idf
    if args.verbose and not args.quiet:
        print(f"rapidscore bertscore: model loaded in {time.perf_counter() - started:.2f} seconds", file=sys.stderr)
    pairs = _Reiterable(make_items)
    counts = None
    idf_read_from = None  # what the weights were computed from, for the resume state
    if idf.kind == "file":
        counts = idf.counts  # the scorer weighs by them already
        assert idf.path is not None
        idf_read_from = f"idf file {file_sha256(idf.path)}"
    elif args.write_idf or (idf.enabled and args.output):
        if "-" in (args.input, args.cand, *(args.ref or [])) and args.output:
            raise ValueError("idf over stdin needs two passes: write an idf file first (--write-idf), then "
                             "stream with --idf-file")
        digest = hashlib.sha256()
        counts = scorer.document_frequencies(pairs, digest=digest)
        idf_read_from = f"references {digest.hexdigest()}"
    # the first pass's counts are idf of the stream's references: signed idf:yes, as --idf in batch
    stream_idf = IdfSource.references(counts) if idf.kind == "references" else None
    if args.write_idf:
        assert counts is not None
        counts.save(args.write_idf)
        if not args.quiet:
            print(f"wrote idf document counts of {counts.n_documents} references to {args.write_idf}",
                  file=sys.stderr)
        if not args.output:
            return 0
    ids = RowIds(args.id_column)
    windowed = [0, 0]  # texts and windows, counted per chunk (a text repeated across chunks counts again)

    # counts the pairs of the rows a resumed run skips: they place its first chunk in -b's batches
    read = ReadCounter(make_items(), args.batch_size or None)

    def score_chunks(items, first_index: int, advance):
        index = first_index
        budget = None if args.memory_budget is None else int(args.memory_budget * 2**20)
        for chunk, result in chunk_results(scorer, ids.strip(items), chunk_size=args.chunk_size or DEFAULT_CHUNK_PAIRS,
                                           memory_budget=budget, cache_tokens=args.cache_tokens,
                                           idf=stream_idf,  # --write-idf alone: no weighting
                                           reference_batch_size=args.batch_size or None,
                                           before=read.before() if args.batch_size else None, progress=advance):
            windowed[0] += result.details["windowed"]
            windowed[1] += result.details["windows"]
            scores = zip(result.precision.tolist(), result.recall.tolist(), result.f1.tolist())
            rows = ids.rows(index, ({"precision": p, "recall": r, "f1": f} for p, r, f in scores))
            index += len(rows)
            yield chunk, rows

    columns = ["index", *(["id"] if args.id_column else []), "precision", "recall", "f1"]
    settings = {"command": "bertscore", "signature": scorer.signature, "batch_size": args.batch_size,
                "idf_documents": counts.n_documents if counts is not None and idf.enabled else None,
                # a resume after an edited reference (same row count) or another idf file is refused
                "idf source sha256": idf_read_from if idf.enabled else None,
                "candidate_column": args.candidate_column if args.input else None,
                "reference_column": args.reference_column if args.input else None, "id_column": args.id_column}
    source = args.input or args.cand
    run_stream(items=read, score_chunks=score_chunks, output=args.output,
               output_fmt=args.output_format, columns=columns, settings=settings, resume=args.resume,
               progress=show_progress(args), total=count_rows(source, args.input_format if args.input else None),
               quiet=args.quiet, chunk_progress=True)
    if scorer.long_texts == "window" and not args.quiet:
        _note_windows(scorer, windowed[0], windowed[1], None)
    return 0

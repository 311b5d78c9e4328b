"""The options every ``rapidscore`` command shares, with the same names and meaning everywhere.

Imports argparse only: building the parser must not load numpy, the encoders or the kernels.
"""

from __future__ import annotations

import argparse

from rapidscore.common.choices import BACKENDS, DEVICES, LONG_TEXTS, PRECISIONS
from rapidscore.common.file_options import is_run_only, run_only

__all__ = ["BACKENDS", "DEVICES", "PRECISIONS", "add_common_options", "add_long_texts_option", "encoder_options",
           "show_progress", "print_table", "positive_int", "non_negative_int", "positive_float", "byte_size",
           "run_only", "is_run_only"]



# argparse types: a bad number is the parser's one-line error naming the option, never a value
# that silently means the default (0 chunks) or a traceback deep in the metric.
def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):  # NaN fails the comparison
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def byte_size(text: str) -> int:
    """A size in bytes: ``1000``, ``512M``, ``2G`` (K/M/G/T powers of 1024)."""
    from rapidscore.common.readers import parse_size  # standard library only: the parser stays light

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


PROGRESS_DEFAULT_HELP = "a bar when stderr is a terminal and the work takes over a second; none with --quiet"


def add_common_options(parser: argparse.ArgumentParser, *, model: bool = True,
                       threads_aliases: tuple[str, ...] = (), progress_default: bool = True,
                       json_help: str = "print one JSON document") -> argparse._ArgumentGroup:
    """Add ``--threads``, ``--json``, ``--progress/--no-progress``, ``-q/--quiet``,
    ``--max-record-bytes`` and, for commands that run a model (``model=True``), ``--backend``,
    ``--device``, ``--precision``.

    ``--threads N`` means the same in every command: at most N threads (N >= 1) for the native
    kernels and the encoder's runtime, the library's ``num_threads=N``; left out (None), all
    cores (the thread budget). ``threads_aliases``: older spellings kept working (bertscore's
    ``--nthreads``).
    ``progress_default``: whether progress bars may show when neither --progress nor --quiet is
    given (then only when stderr is a terminal, after a second of work: rapidscore.common.progress,
    the one policy of every command); False for commands with no work to follow (serve, export).
    """
    group = parser.add_argument_group("common options")
    run_only(group.add_argument(
        "--threads", *threads_aliases, dest="threads", type=positive_int, default=None, metavar="N",
        help="threads for native code and the encoder, N >= 1 (default: all cores)"))
    if model:
        group.add_argument("--backend", default=None, choices=BACKENDS,
                           help="encoder runtime (default: onnx; openvino for bf16, torch for fp16)")
        group.add_argument("--device", default="cpu", choices=DEVICES, help="where the encoder runs (default: cpu)")
        group.add_argument("--precision", default="fp32", choices=PRECISIONS,
                           help="fp32 = exact; bf16 = fast mode on CPUs with bf16 instructions (or torch); "
                                "fp16 = GPU fast mode (--backend torch --device cuda); int8 = int8 weights, two "
                                "int8 passes (ONNX Runtime, CPU; faster than fp32 with VNNI); "
                                "fast = the fastest mode within the bound this machine has (fp16 on cuda, bf16 "
                                "with bf16 instructions, int8 with VNNI, else fp32)")
    run_only(group.add_argument("--json", action="store_true", help=json_help))
    run_only(group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                                help="--progress: progress bars on stderr, at once, even when it is not a terminal; "
                                     "--no-progress: none (default: "
                                     f"{PROGRESS_DEFAULT_HELP if progress_default else 'off'})"))
    parser.set_defaults(progress_default=progress_default)
    run_only(group.add_argument("-q", "--quiet", action="store_true",
                                help="print results only: no progress bars or notes on stderr"))
    # None: rapidscore.common.readers' bound stands ($RAPIDSCORE_MAX_RECORD_BYTES, else 256 MiB)
    run_only(group.add_argument(
        "--max-record-bytes", dest="max_record_bytes", type=byte_size, default=None, metavar="SIZE",
        help="the longest line, CSV record or field an input file may hold, e.g. 512M or 2G; also raises the bound "
             "on a whole JSON document (2 GiB) when larger (default: $RAPIDSCORE_MAX_RECORD_BYTES, else 256M)"))
    return group


def add_long_texts_option(parser, default: str | None = "truncate") -> None:
    """``--long-texts {truncate,window}``: what BERTScore does with texts longer than the model's
    maximum length (docs/bertscore.md, "Long texts")."""
    parser.add_argument("--long-texts", dest="long_texts", choices=LONG_TEXTS, default=default,
                        help="texts longer than the model's maximum length: truncate (default, as bert-score) "
                             "or window (embedded whole in overlapping windows of the maximum length, half a "
                             "window apart; each token from the window where it sits furthest from a cut)")


def show_progress(args: argparse.Namespace) -> bool:
    """Whether the command shows progress bars, by the one policy of every command
    (rapidscore.common.progress): --progress / --no-progress when given (--progress: bars at once,
    whatever stderr is); else none with --quiet; else only when stderr is a terminal, and a bar
    only after a second of work. Call it once per run, before the work."""
    from rapidscore.common.progress import decide  # standard library only: the parser stays light

    return decide(args.progress, quiet=args.quiet, default=args.progress_default)


def print_table(header: list[str], rows) -> None:
    """A markdown table on stdout after a blank line: ``--table`` of every command
    (``rapidscore bertscore --table``, ``rapidscore nrr --table``)."""
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def encoder_options(args: argparse.Namespace) -> dict:
    """The engine options of the common flags, as keyword arguments of the encoder."""
    options = {"backend": args.backend, "device": args.device, "precision": args.precision}
    if args.threads is not None:  # None: the encoder's own default (the thread budget)
        options["num_threads"] = args.threads
    return options

"""``rapidscore METRIC``: the command of a registered metric that has none of its own (refusal, and
any metric added with ``rapidscore.metrics.register``).

Reads the rows of a file in any format the reader knows (one column per input of the metric,
named as the metric names them or mapped with ``--column``), scores them in chunks through the
metric, and writes one row per input row (JSONL, CSV or Parquet; resumable) with the metric's
output columns; the metric's totals go to stderr (or stdout with ``--json``). Each option the
metric declares settable per request (``RequestOption``) is a flag (``--name-with-dashes``; a bool one is
``--name/--no-name``), checked against the declaration; any other keyword of the metric's
``build`` is ``--set NAME=VALUE``. Example::

    rapidscore refusal --input responses.jsonl --output decisions.jsonl --set method=keyword
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rapidscore.common.cli_options import add_common_options, positive_int, run_only
from rapidscore.common.file_options import input_option, output_option

if TYPE_CHECKING:
    from rapidscore.common.metric import Option

__all__ = ["MetricCommand"]

# the argparse dest of a request option's flag (prefixed: an option's name may be any command's dest)
_DEST = "metric_option_"


def _option_value(text: str) -> Any:
    """A ``--set`` value: JSON (numbers, true/false, null, lists) where it parses, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _flag(option: Option) -> str:
    return "--" + option.name.replace("_", "-")


def _converter(option: Option) -> Callable[[str], Any]:
    """The argparse ``type`` of a declared option: its type, bounds checked (an error argparse
    reports naming the flag)."""
    kind = option.type
    if kind not in (int, float, str):
        return _option_value  # another type: a JSON value, as --set reads it, checked by the metric

    def convert(text: str) -> Any:
        value = kind(text)  # ValueError: argparse's "invalid int value: 'x'"
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if isinstance(value, (int, float)) and ((option.minimum is not None and value < option.minimum) or
                                                (option.maximum is not None and value > option.maximum)):
            low = "" if option.minimum is None else f">= {option.minimum}"
            high = "" if option.maximum is None else f"<= {option.maximum}"
            raise argparse.ArgumentTypeError(f"must be {' and '.join(b for b in (low, high) if b)}, got {text}")
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its message
    return convert


def _add_request_options(parser: argparse.ArgumentParser, metric: Any) -> None:
    """One flag per declared request option; default None ("not given": the metric's build
    default applies). A flag another option of the command already has stays a --set name."""
    from rapidscore.common.metric import request_options

    if not request_options(metric):
        return
    group = parser.add_argument_group(f"{metric.name} options",
                                      "each is a keyword of the metric (also --set NAME=VALUE)")
    for option in request_options(metric):
        shown = str(option.default).lower() if isinstance(option.default, bool) else repr(option.default)
        help_text = (option.help if option.default is None else f"{option.help} (default {shown})").replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": _DEST + option.name, "default": None, "help": help_text}
        if option.type is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs.update(type=_converter(option), metavar=option.type.__name__.upper())
            if option.choices is not None:
                kwargs.update(choices=option.choices, metavar=None)
        try:
            action = group.add_argument(_flag(option), **kwargs)
        except argparse.ArgumentError:
            continue  # the command's own flag: the option is --set NAME=VALUE only
        if option.run_only:
            run_only(action)


class MetricCommand:
    """The argparse command of one registered metric: ``add_arguments(parser)``, ``run(args)``."""

    def __init__(self, name: str):
        self.name = name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from rapidscore.common.stream_io import INPUT_FORMATS, OUTPUT_FORMATS, add_column_option, key_value
        from rapidscore.metrics import get_metric

        metric = get_metric(self.name)
        inputs = ", ".join(f"{c.name}{' (optional)' if c.optional else ''}" for c in metric.inputs)
        input_option(parser.add_argument(
            "--input", "-i", required=True, metavar="FILE",
            help=f"one row per item with the column(s) {inputs}: .jsonl/.json/.csv/.tsv/.parquet/"
                 ".txt (a .txt line is the column 'text'; .gz of each) or '-' for stdin"))
        parser.add_argument("--input-format", choices=INPUT_FORMATS, default=None,
                            help="format of --input (default: from the extension; jsonl for stdin)")
        output_option(parser.add_argument(
            "--output", "-o", default="-", metavar="FILE",
            help="one row per input row: .jsonl, .csv or .parquet (default '-': JSONL on stdout)"), stream=True)
        parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default=None,
                            help="format of --output (default: from the extension; jsonl for stdout)")
        add_column_option(parser)
        parser.add_argument("--id-column", default=None, help="copy this input column to the output rows")
        run_only(parser.add_argument("--chunk-size", type=positive_int, default=4096, metavar="N",
                                     help="rows per chunk (default 4096)"))
        run_only(parser.add_argument("--resume", action="store_true",
                                     help="continue a partly written --output (checked against its input and "
                                          "settings)"))
        parser.add_argument("--set", dest="options", action="append", type=key_value, default=[],
                            metavar="NAME=VALUE", help="an option of the metric (a JSON value, else text), "
                                                       "e.g. --set method=keyword; repeatable")
        add_common_options(parser, model=False, progress_default=True,
                           json_help="print the totals as one JSON document on stdout")
        _add_request_options(parser, metric)

    def run(self, args: argparse.Namespace) -> int:
        from rapidscore.common.metric import request_options
        from rapidscore.common.stream_io import stream_metric_file
        from rapidscore.metrics import get_metric

        metric = get_metric(self.name)
        options = {key: _option_value(value) for key, value in args.options}
        for option in request_options(metric):
            value = getattr(args, _DEST + option.name, None)
            if value is None:
                continue
            if option.name in options:
                raise ValueError(f"{_flag(option)} and --set {option.name}=... both set {option.name!r}: give it once")
            options[option.name] = value
        if args.threads is not None:  # --threads N: at most N threads, as in every command
            if any(option.name == "num_threads" for option in metric.options):
                options["num_threads"] = args.threads
            else:  # the budget caps the metric's kernels and the runtimes of encoders made from now on
                from rapidscore.threads import set_thread_budget

                set_thread_budget(args.threads)
        stream_metric_file(metric, lambda: metric.build(**options), args, {"options": args.options})
        return 0

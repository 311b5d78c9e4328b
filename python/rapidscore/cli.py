"""Command line entry point: ``rapidscore <metric> ...``.

Each metric keeps its command in its own ``cli`` module, which imports only argparse-level code
(its package ``__init__`` loads nothing eagerly): building the parser, ``--help`` included, never
loads numpy, the kernels or an encoder. A command module provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code); ``run`` imports the metric when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from rapidscore._version import __version__

# command -> (module, one-line help)
COMMANDS = {
    "bertscore": ("rapidscore.bertscore.cli", "BERTScore precision, recall and F1 (bert-score compatible)"),
    "nrr": ("rapidscore.nrr.cli", "semantic similarity and the Negative Rejection Rate"),
    "abstention": ("rapidscore.abstention.cli", "abstention metrics over a concept taxonomy (SELECT)"),
    "ner": ("rapidscore.ner.cli", "NER evaluation with DMBertA and SemEval schemes"),
    "serve": ("rapidscore.serve.cli", "HTTP scoring service with micro-batching (the [serve] extra)"),
}


def _available_commands():
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # command not part of this build
            raise
        yield name, module, help_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rapidscore",
        description="Fast, reference-exact evaluation metrics for LLM and NER outputs.",
        epilog="Run 'rapidscore COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"rapidscore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, help_text in _available_commands():
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"rapidscore {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

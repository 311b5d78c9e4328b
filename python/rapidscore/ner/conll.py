"""CoNLL files: one token per line, its columns separated by whitespace (or a chosen separator),
the label in the last column (or a chosen one), a blank line between sentences, ``-DOCSTART-``
lines skipped. ``.gz`` files are read compressed. Errors name the file and the line.

Reading and writing are pure functions of their arguments (thread-safe).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rapidscore.common.readers import line_too_long, max_record_bytes
from rapidscore.ner.tags import TagError, TagReport, tag_report

if TYPE_CHECKING:
    import argparse

__all__ = ["ConllSentences", "read_conll", "write_conll", "conll_report"]

DOCSTART = "-DOCSTART-"


@dataclass(frozen=True)
class ConllSentences:
    """The sentences of a CoNLL file: ``tokens[i]`` and ``tags[i]`` (the label column) of
    sentence ``i``, ``lines[i]``, the line number (1-based) of its first token, and the number of
    columns of the file's lines. Safe to read from several threads (nothing here mutates it)."""

    path: str
    tokens: list
    tags: list
    lines: list
    columns: int

    def __len__(self) -> int:
        return len(self.tags)


def _open_text(path: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline=None)
    return open(path, encoding="utf-8", newline=None)


def _bounded_lines(handle, path: str) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of a text file, each read with readline's size limit: a line (a .gz
    bomb without a newline) over the readers' bound is a ValueError naming it, not all of it read."""
    limit = max_record_bytes()
    number = 0
    while raw := handle.readline(limit + 1):  # characters; universal newlines: "\n" ends every line
        number += 1
        if len(raw) > limit and len(raw.removesuffix("\n")) > limit:
            raise line_too_long(f"{path}:{number}", limit)
        yield number, raw


def read_conll(path: str, *, tag_column: int = -1, token_column: int = 0, separator: str | None = None,
               ) -> ConllSentences:
    """The sentences of the CoNLL file ``path``. ``tag_column`` / ``token_column``: column
    indices (negative from the end); ``separator``: None splits on any whitespace, ``"\\t"`` on
    tabs (tokens that hold spaces). Every token line must have as many columns as the first one;
    a line with too few columns, an empty label, a file without sentences raise TagError naming
    the file and the line."""
    tokens: list[list[str]] = []
    tags: list[list[str]] = []
    lines: list[int] = []
    sentence_tokens: list[str] = []
    sentence_tags: list[str] = []
    n_columns = first_line = 0

    def close_sentence() -> None:
        if sentence_tags:
            tokens.append(list(sentence_tokens))
            tags.append(list(sentence_tags))
            sentence_tokens.clear()
            sentence_tags.clear()

    number = 0
    try:
        with _open_text(path) as handle:
            for number, raw in _bounded_lines(handle, path):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    close_sentence()
                    continue
                columns = line.split(separator) if separator is not None else line.split()
                if columns[0].strip() == DOCSTART:  # a document boundary ends the sentence too
                    close_sentence()
                    continue
                if not n_columns:
                    n_columns, first_line = len(columns), number
                    for name, index in (("tag_column", tag_column), ("token_column", token_column)):
                        if not -n_columns <= index < n_columns:
                            raise TagError(f"{path}:{number}: {name} {index} is out of range: "
                                           f"the line has {n_columns} column(s)")
                elif len(columns) != n_columns:
                    raise TagError(f"{path}:{number}: {len(columns)} column(s), expected {n_columns} "
                                   f"(as on line {first_line}): {line!r:.80}")
                label = columns[tag_column].strip()
                if not label:
                    raise TagError(f"{path}:{number}: empty label in column {tag_column}")
                if not sentence_tags:
                    lines.append(number)
                sentence_tokens.append(columns[token_column].strip())
                sentence_tags.append(label)
            close_sentence()
    except UnicodeDecodeError as exc:
        raise TagError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a truncated .gz was "(unexpected ...)"
        raise TagError(f"{path}:{number + 1}: cannot read the compressed data (truncated or corrupt file?): "
                       f"{exc}") from None
    except OSError as exc:
        raise TagError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except TagError:
        raise
    except ValueError as exc:  # a line over the readers' bound
        raise TagError(str(exc)) from None
    if not tags:
        raise TagError(f"{path}: no sentences (one token per line, a blank line between sentences)")
    return ConllSentences(str(path), tokens, tags, lines, n_columns)


def write_conll(path: str, tokens: Sequence[Sequence[str]], *tag_columns: Sequence[Sequence[str]],
                separator: str = " ") -> None:
    """Write sentences as a CoNLL file: the token, then each of ``tag_columns`` (e.g. gold then
    predicted, conlleval's layout), a blank line after each sentence. Tokens and labels must not
    be empty nor hold the separator or a line break (TagError naming the sentence)."""
    if not tag_columns:
        raise TagError("write_conll needs at least one column of labels")
    lines = []
    for i, words in enumerate(tokens):
        columns = [list(words)] + [list(column[i]) for column in tag_columns]
        for c, column in enumerate(columns[1:], 1):
            if len(column) != len(columns[0]):
                raise TagError(f"sentence {i}: {len(columns[0])} tokens, {len(column)} labels in column {c}")
        for row in zip(*columns):
            for value in row:
                if not value or value != value.strip() or (separator in value) or "\n" in value:
                    raise TagError(f"sentence {i}: {value!r} cannot be written as a CoNLL field")
            lines.append(separator.join(row))
        lines.append("")
    from rapidscore.common.outputs import open_output

    with open_output(path, "CoNLL output") as handle:
        handle.write("\n".join(lines) + ("\n" if lines else ""))


def aligned_predictions(gold: ConllSentences, pred: ConllSentences) -> None:
    """Check that ``pred`` has the sentences and tokens of ``gold`` (TagError naming the lines);
    a file of labels only (one column) has no tokens to compare."""
    compare_tokens = gold.columns > 1 and pred.columns > 1
    if len(pred) != len(gold):
        raise TagError(f"{pred.path}: {len(pred)} sentences, the gold file {gold.path} has {len(gold)}")
    for i, (gold_words, pred_words) in enumerate(zip(gold.tokens, pred.tokens)):
        where = f"{pred.path}:{pred.lines[i]} (sentence {i}, gold {gold.path}:{gold.lines[i]})"
        if len(gold_words) != len(pred_words):
            raise TagError(f"{where}: {len(pred_words)} tokens, the gold sentence has {len(gold_words)}")
        for j, (g, p) in enumerate(zip(gold_words, pred_words)):
            if compare_tokens and g != p:
                raise TagError(f"{where}: token {j} is {p!r}, the gold token is {g!r}")


def conll_report(gold_path: str, pred_path: str | None = None, *, scheme: object = None, mode: object = None,
                 tag_column: int = -1, separator: str | None = None, suffix: bool = False) -> TagReport:
    """seqeval's report of a predicted CoNLL file against a gold one (same tokens, labels in
    ``tag_column``), or, without ``pred_path``, of a conlleval-style file whose last two columns
    are the gold and the predicted labels."""
    if pred_path is None:
        gold = read_conll(gold_path, tag_column=-2, separator=separator)
        pred = read_conll(gold_path, tag_column=-1, separator=separator)
    else:
        gold = read_conll(gold_path, tag_column=tag_column, separator=separator)
        pred = read_conll(pred_path, tag_column=tag_column, separator=separator)
        aligned_predictions(gold, pred)
    return tag_report(gold.tags, pred.tags, scheme=scheme, mode=mode, suffix=suffix)


def run_tag_command(args: argparse.Namespace) -> int:
    """``rapidscore ner --scheme S`` (CoNLL input): seqeval's report per model, text or JSON."""
    import json
    import math
    import sys

    mode = "strict" if args.strict else None
    if args.pred:
        reports = {name: conll_report(args.gold, path, scheme=args.scheme, mode=mode, tag_column=args.tag_column)
                   for name, path in args.pred}
    else:
        reports = {"pred": conll_report(args.gold, scheme=args.scheme, mode=mode)}
    if args.json:
        def plain(value: float) -> float | None:  # JSON has no NaN (a macro average without entities)
            return None if isinstance(value, float) and math.isnan(value) else value

        document = {name: {row: {key: plain(value) for key, value in scores.items()}
                           for row, scores in report.to_dict().items()}
                    for name, report in reports.items()}
        json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for name, report in reports.items():
        if len(reports) > 1 or not args.quiet:
            print(f"{name} ({report.mode} mode{', ' + report.scheme if report.scheme else ''})")
        print(report.text())
    return 0

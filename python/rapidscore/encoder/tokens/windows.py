"""Texts longer than the model's maximum length, embedded in overlapping windows
(``Encoder(long_texts="window")``, ``BERTScore(long_texts="window")``).

A text is tokenised whole (no truncation): ``prefix + content + suffix``, where ``prefix`` and
``suffix`` are the special tokens the tokenizer frames every sequence with (BERT: ``[CLS]`` and
``[SEP]``; RoBERTa: ``<s>`` and ``</s>``; read off the tokenizer itself,
``BatchTokenizer.framing``). With ``W`` tokens per model input, a window holds
``C = W - len(prefix) - len(suffix)`` content tokens.

- A text of at most ``W`` tokens is one model input, exactly as with truncation.
- A longer one (n > C content tokens) is cut into windows of C content tokens starting every
  ``stride = max(1, C // 2)`` tokens; the last window is moved back to end at the text's end, so
  every window is full. Each window is framed as the tokenizer frames a sequence
  (``prefix + slice + suffix``) and run as a separate model input: positions restart in each.
- Each content token takes its embedding from the window where it sits furthest from a cut: its
  distance to the nearest window edge that cuts the text (the first window's start and the last
  window's end are the text's own edges and cut nothing). Ties go to the earlier window. With
  half-overlapping windows every token keeps at least about C/4 tokens of context on a cut side.
- The whole text's special tokens are the first window's leading ones and the last window's
  trailing ones, so token weights and idf see the text's ids exactly as a short text's.

The store row of a windowed text holds all its tokens; ``split_windows`` says which input
position lands in which row, so a batch of windows is scattered into the rows as it comes out
of the model (hidden states of one batch at a time, never of every window at once).

Memory therefore grows with the text (its whole tokenisation, then hidden_size floats per token:
MiniLM, 1.5 KB per token), not with a window: texts over ``MAX_WINDOW_TEXT_CHARS``
characters are refused (``check_window_texts``: a ValueError naming the text and the bound)
before anything is tokenised. Truncation keeps memory in proportion to ``max_length`` for any
length (``rapidscore.encoder.tokens.bounded``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rapidscore.common.choices import LONG_TEXTS

__all__ = ["LONG_TEXTS", "MAX_WINDOW_TEXT_CHARS", "WindowPlan", "check_long_texts", "check_window_texts",
           "choose_windows", "count_windows", "split_windows", "window_stride"]

# The longest text long_texts="window" takes, in characters: about 250,000 English tokens,
# 0.4 GB of MiniLM token vectors (every token of a windowed text is stored).
MAX_WINDOW_TEXT_CHARS = 1 << 20


def check_long_texts(value) -> str:
    """``value`` if it is one of ``LONG_TEXTS``; ValueError naming the allowed values otherwise."""
    if not isinstance(value, str) or value not in LONG_TEXTS:
        raise ValueError(f"long_texts must be one of {LONG_TEXTS}, got {value!r}")
    return value


def check_window_texts(texts, name: str = "text", *, stripped: bool = False) -> None:
    """ValueError naming the first text over ``MAX_WINDOW_TEXT_CHARS`` characters (``name[k]``,
    or ``name k`` for the default name) and the bound. ``stripped``: measure the texts as
    ``str.strip`` leaves them (BERTScore's)."""
    for index, text in enumerate(texts):
        if len(text) > MAX_WINDOW_TEXT_CHARS and (not stripped or len(text.strip()) > MAX_WINDOW_TEXT_CHARS):
            where = f"text {index}" if name == "text" else f"{name}[{index}]"
            raise ValueError(f"{where}: {len(text):,} characters, over the {MAX_WINDOW_TEXT_CHARS:,} that "
                             "long_texts='window' embeds (every token of a windowed text is kept, so memory "
                             "grows with the text); shorten or split it, or use long_texts='truncate'")


def window_stride(content: int) -> int:
    """Content tokens between the starts of consecutive windows of ``content`` tokens."""
    return max(1, content // 2)


def count_windows(lengths: np.ndarray, max_length: int, n_special: int) -> np.ndarray:
    """Windows per text of ``lengths`` tokens (specials included): 1 up to ``max_length``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    content = max_length - n_special
    stride = window_stride(content)
    beyond = np.maximum(lengths - n_special - content, 0)
    return 1 + (beyond + stride - 1) // stride


def choose_windows(n: int, content: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows of a text of ``n`` > ``content`` content tokens: their starts (K,) and, per
    content token, the window it takes its embedding from (n,)."""
    if n <= content:
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    stride = window_stride(content)
    count = 1 + (n - content + stride - 1) // stride
    starts = np.minimum(np.arange(count, dtype=np.int64) * stride, n - content)
    best = np.zeros(n, dtype=np.int64)
    best_distance = np.full(n, -1, dtype=np.int64)
    big = np.int64(n + 1)  # "no cut on this side"
    local = np.arange(content, dtype=np.int64)
    for k, start in enumerate(starts.tolist()):
        left = local if k > 0 else np.full(content, big)
        right = content - 1 - local if k < count - 1 else np.full(content, big)
        distance = np.minimum(left, right)
        span = slice(start, start + content)
        better = distance > best_distance[span]  # strictly: ties keep the earlier window
        best[span][better] = k
        best_distance[span][better] = distance[better]
    return starts, best


@dataclass(frozen=True)
class WindowPlan:
    """The model inputs of a list of texts and where their outputs go.

    ``inputs[j]``: token ids of model input j (a short text whole, or one framed window).
    ``destinations[j]``: per position of input j, the store row it fills, or -1 (a position
    whose token takes its embedding from another window). ``windowed``: texts longer than the
    maximum length; ``windows``: their windows.
    """

    inputs: list[np.ndarray]
    destinations: list[np.ndarray]
    windowed: int
    windows: int


def split_windows(ids: list[np.ndarray], offsets: np.ndarray, max_length: int, prefix: np.ndarray,
                  suffix: np.ndarray) -> WindowPlan:
    """Model inputs of texts tokenised whole (``ids``; text k fills store rows
    ``offsets[k]:offsets[k + 1]``): texts of at most ``max_length`` tokens as they are, longer
    ones as framed windows (see the module's docstring)."""
    n_prefix, n_suffix = len(prefix), len(suffix)
    content = max_length - n_prefix - n_suffix
    if content < 1:
        raise ValueError(f"max_length={max_length} leaves no room for text between the {n_prefix + n_suffix} "
                         "special tokens of a window")
    inputs: list[np.ndarray] = []
    destinations: list[np.ndarray] = []
    windowed = windows = 0
    for k, text_ids in enumerate(ids):
        row = int(offsets[k])
        length = len(text_ids)
        if length <= max_length:
            inputs.append(text_ids)
            destinations.append(np.arange(row, row + length, dtype=np.int64))
            continue
        if not (np.array_equal(text_ids[:n_prefix], prefix)
                and np.array_equal(text_ids[length - n_suffix:], suffix)):
            raise ValueError(f"text {k}: its token ids do not start with {prefix.tolist()} and end with "
                             f"{suffix.tolist()} (the tokenizer's framing), so it cannot be cut into windows")
        body = text_ids[n_prefix:length - n_suffix]
        starts, best = choose_windows(len(body), content)
        last = len(starts) - 1
        for w, start in enumerate(starts.tolist()):
            inputs.append(np.concatenate([prefix, body[start:start + content], suffix]))
            dest = np.full(max_length, -1, dtype=np.int64)
            if w == 0:
                dest[:n_prefix] = np.arange(row, row + n_prefix)
            mine = np.flatnonzero(best[start:start + content] == w)
            dest[n_prefix + mine] = row + n_prefix + start + mine
            if w == last:
                dest[max_length - n_suffix:] = np.arange(row + length - n_suffix, row + length)
            destinations.append(dest)
        windowed += 1
        windows += len(starts)
    return WindowPlan(inputs, destinations, windowed, windows)

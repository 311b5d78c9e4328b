"""Helpers for tests and benchmarks: tiny randomly initialised models built offline, and
synthetic data of real shapes.

- :mod:`.tiny_models`, :mod:`.tiny_sentence_models`: tiny BERT-family models and sentence
  models (building one needs the ``[export]`` extra: torch, transformers); the family tables and
  configs are in :mod:`.tiny_configs`, the training corpus and tokenizer trainers in
  :mod:`.tiny_tokenizers`.
- :mod:`.bench_models`: full-size shapes with random weights (bert-base, roberta-large) for the
  benchmarks.
- :mod:`.corpora`: deterministic synthetic English (the benchmark's W1 pairs and long texts),
  the transliteration hard cases and the model-family parity inputs, shared by the tests and
  bench/.
- :mod:`.select_release`: a synthetic SELECT release (results files of the real one's shape)
  for the abstention metric.
- :mod:`.streams`: waiting for a streamed command's resume state to record rows (before a kill).
- :mod:`.approximation`: word-salad texts and a brute-force Kendall tau, for checking a
  non-exact mode (bf16, int8, "fast") against fp32.
- :mod:`.command_output`, :mod:`.scripts`: a command's one error line, files of lines, and a
  bench/ or tools/ script loaded as a module (its sibling modules beside it).

Importing this package is cheap. Used by rapidscore's own test suite and bench/, and by anyone
who wants to test code that uses rapidscore without downloading a model or a data set. It sits
above the metrics (it may use them), and no metric imports it.
"""

from __future__ import annotations

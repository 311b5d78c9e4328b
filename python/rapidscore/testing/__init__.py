"""Helpers for tests and benchmarks: tiny randomly initialised models built offline.

Importing this package is cheap; building a model needs the ``[export]`` extra (torch,
transformers). Used by rapidscore's own test suite and bench/, and by anyone who wants to test
code that uses rapidscore without downloading a model.
"""

from __future__ import annotations

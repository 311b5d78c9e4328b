"""Module scripts for Hugging Face ``evaluate.load(path)``: each imports its evaluation module
class from ``rapidscore.integrations.hf_evaluate`` (``module_path(name)`` gives the path)."""

from __future__ import annotations

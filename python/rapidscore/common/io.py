"""The names of the one input reader (:mod:`rapidscore.common.readers`), kept here where callers
import them. Files are written through :mod:`rapidscore.common.outputs`.
"""

from __future__ import annotations

from rapidscore.common.readers import (
    FORMATS,
    check_input_file,
    decoded_lines,
    detect_format,
    import_parquet,
    iter_column,
    iter_lines,
    jsonl_objects,
    load_json,
    read_column,
    read_records,
    read_texts,
)

__all__ = ["FORMATS", "check_input_file", "iter_lines", "load_json",
           "jsonl_objects", "decoded_lines", "import_parquet", "detect_format", "iter_column", "read_column",
           "read_texts", "read_records"]

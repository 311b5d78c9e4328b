"""The names of the one input reader (:mod:`rapidscore.common.readers`) and of the checks of the
one output layer (:mod:`rapidscore.common.outputs`), kept here where callers import them.
"""

from __future__ import annotations

from rapidscore.common.outputs import check_output_directory, check_outputs
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

__all__ = ["FORMATS", "check_input_file", "check_outputs", "check_output_directory", "iter_lines", "load_json",
           "jsonl_objects", "decoded_lines", "import_parquet", "detect_format", "iter_column", "read_column",
           "read_texts", "read_records"]

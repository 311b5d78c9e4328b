"""``rapidscore report``: one self-contained HTML page of an evaluation run.

The page is built from the files the other commands write (BERTScore, NRR and NER JSON, their
streamed JSONL rows, a registered metric's rows or totals, the abstention tables, or a SELECT
results folder): summary tables per system with the signature of every number, the figures as
inline SVG, the worst and best items with their texts, and, given a model, the token alignment of
one BERTScore pair. It fetches nothing: CSS, the few lines of JS that sort tables and the figures
are inline, so the page opens from a file anywhere.

Modules: :mod:`~rapidscore.report.cli` (the command), :mod:`~rapidscore.report.inputs` (reading
result files and telling their kind from their fields), :mod:`~rapidscore.report.alignment` (the
token alignment), :mod:`~rapidscore.report.figures` (the figures, as SVG) and
:mod:`~rapidscore.report.html` (the page). Nothing is imported here: the CLI's parser stays light.
"""

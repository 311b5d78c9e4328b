"""Export: a model's graph made once and kept on disk.

The ONNX export of an encoder truncated to its layers (``onnx_export``), its int8 copy
(``int8``), a sequence classifier's export with its head (``classifier_export``), and the disk
cache that holds them (``disk_cache``, with the staging directories of writers, ``staging``).
Torch and onnx are needed only here, and only when an entry is missing.
"""

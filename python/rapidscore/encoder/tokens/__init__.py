"""Tokenisation: texts to token ids in batches, under the model's bounds.

Batch tokenisation with the Rust ``tokenizers`` library or a transformers Python tokenizer
(``tokenization``, ``python_tokenizer``), long texts tokenised in bounded pieces (``bounded``)
or split into overlapping windows (``windows``), and length-sorted batches under a token budget
(``batching``).
"""

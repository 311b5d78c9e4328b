"""Sentence vectors of an encoder's model, as its sentence-transformers pipeline makes them.

:class:`SentenceEncoder` wraps an ``Encoder`` (token vectors) and the model's
:class:`SentencePipeline` (``modules.load_pipeline``), with the tokenizer the pipeline's settings
ask for (max_seq_length, do_lower_case). ``Encoder.sentence`` makes one on first use;
``Encoder.sentence_embeddings`` is ``encoder.sentence.embed``. Each step follows
sentence-transformers 6.2 (``SentenceTransformer.encode``, ``Transformer._get_prompt_length``);
tests/encoder/test_sentence_pipeline.py compares both paths (numpy on a flat store, torch on the
device) with ``SentenceTransformer.encode`` configuration by configuration.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.common.inputs import as_texts
from rapidscore.device.chunk_pipeline import PaddedBatch, run_overlapped
from rapidscore.encoder.sentence.modules import load_pipeline
from rapidscore.encoder.sentence.pipeline import SentencePipeline
from rapidscore.encoder.sentence.pooling import check_mode
from rapidscore.encoder.store import TokenStore
from rapidscore.encoder.tokens.batching import pad_batch
from rapidscore.encoder.tokens.tokenization import BatchTokenizer, lowercase_tokenizer_json, prompt_token_count
from rapidscore.errors import TruncationWarning

__all__ = ["SentenceEncoder"]


class SentenceEncoder:
    """One vector per text by ``pipeline`` over ``encoder``'s token vectors, texts tokenised by
    ``tokenizer`` (the encoder's own unless the pipeline's settings need another).

    With the torch backend the vectors are made on the model's device, batch by batch (only the
    (n, dim) vectors cross to the host); ONNX Runtime and OpenVINO pool the host store in numpy.
    Thread-safe as its encoder is.
    """

    def __init__(self, encoder: Any, pipeline: SentencePipeline, tokenizer: BatchTokenizer):
        self.encoder, self.pipeline, self.tokenizer = encoder, pipeline, tokenizer

    @classmethod
    def load(cls, encoder: Any, *, max_length: int | None = None, positions: int | None = None) -> SentenceEncoder:
        """The pipeline of ``encoder``'s model directory (a module, mode or setting rapidscore does
        not implement is a ValueError naming it and its file) and its tokenizer: truncating at
        ``max_length`` when given, else at the model's max_seq_length (within its ``positions``),
        else at the encoder's max_length; lowercasing first where the model says do_lower_case."""
        pipeline = load_pipeline(encoder.model_dir)
        pipeline.output_dim(encoder.hidden_size)  # a module expecting other sizes fails here, named
        if max_length is None:
            max_length = encoder.max_length
            if pipeline.max_seq_length is not None:
                max_length = pipeline.max_seq_length if positions is None else min(pipeline.max_seq_length, positions)
        tokenizer = encoder.tokenizer
        if pipeline.do_lower_case or max_length != encoder.max_length or not getattr(tokenizer, "truncate", True):
            # sentence-transformers truncates at max_seq_length and lowercases in the tokenizer
            source = encoder.loaded.tokenizer_source
            text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
            if pipeline.do_lower_case:
                text = lowercase_tokenizer_json(text)
            tokenizer = BatchTokenizer(text, encoder.spec, max_length)
        return cls(encoder, pipeline, tokenizer)

    @property
    def max_length(self) -> int:
        """Truncation length of the texts (special tokens and prompt included)."""
        return self.tokenizer.max_length

    def embed(self, texts: Sequence[str], pooling: str | None = None, normalize: bool | None = None, *,
              prompt_name: str | None = None, prompt: str | None = None, progress: bool | None = None,
              stacklevel: int = 2) -> np.ndarray:
        """One vector per text, (n, dim) float32, as the model's sentence-transformers pipeline
        makes it (``SentenceTransformer.encode``; ``Encoder.sentence_embeddings``): its Pooling
        (cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken, concatenated), Dense and
        Normalize modules, its max_seq_length and do_lower_case. A model directory without modules.json: mean pooling,
        unit length. A module rapidscore does not implement is a ValueError naming it.

        ``prompt_name`` / ``prompt``: as ``encode`` takes them: the prompt is put before each text
        (the model's default prompt when neither is given; ``prompt=""`` for none), and a Pooling
        with ``include_prompt=False`` leaves its tokens out.
        ``pooling`` (a mode name) replaces the model's pooling and Dense layers by that pooling of
        the token vectors; ``normalize`` True/False forces unit length on or off at the end. None
        (default): the model's own. With the torch backend the vectors are made on the model's
        device, batch by batch: only the (n, dim) vectors cross to the host. Duplicate texts are
        embedded once. ``stacklevel``: where a TruncationWarning points, as
        for ``warnings.warn`` called here.
        """
        self._check(pooling)
        texts = as_texts(texts, "texts")
        index: dict[str, int] = {}
        inverse = np.fromiter((index.setdefault(text, len(index)) for text in texts), dtype=np.int64,
                              count=len(texts))
        return self.embed_unique(list(index), pooling, normalize, prompt_name=prompt_name, prompt=prompt,
                                 progress=progress, stacklevel=stacklevel + 1)[inverse]

    def embed_unique(self, texts: list[str], pooling: str | None = None, normalize: bool | None = None, *,
                     prompt_name: str | None = None, prompt: str | None = None, progress: bool | None = None,
                     unpadded: bool | None = None, stacklevel: int = 2) -> np.ndarray:
        """``embed`` of validated, distinct texts (a scorer's plan): (n, dim) float32.
        ``unpadded``: as in ``Encoder.embed_ids`` (the numpy path)."""
        pipeline = self._pipeline(pooling, normalize)
        inputs, prompt_length = self.prompt_inputs(texts, prompt_name=prompt_name, prompt=prompt)
        ids, truncated = self.tokenizer.tokenize_ids(inputs)
        if truncated:
            warnings.warn(f"{truncated} of {len(texts)} distinct texts were longer than {self.max_length} "
                          f"tokens and were truncated", TruncationWarning, stacklevel=stacklevel)
        encoder = self.encoder
        progress = encoder.progress if progress is None else progress
        if not encoder.runtime.runs_torch:
            store = encoder.embed_ids(ids, truncated=truncated, progress=progress, unpadded=unpadded)
            return self._pool_store(store, pipeline, prompt_length)
        return self._pool_batches(ids, pipeline, prompt_length, progress)

    def prompt_inputs(self, texts: list[str], *, prompt_name: str | None = None,
                      prompt: str | None = None) -> tuple[list[str], int]:
        """The texts as the model's pipeline tokenises them (the prompt put before each) and the
        prompt's length in tokens as sentence-transformers counts it (the prompt tokenised alone,
        less a trailing special token; 0 without a prompt): ``pool(store, prompt_length=...)`` of
        their encoding leaves that many leading tokens out where the Pooling excludes the prompt.
        Lowercasing (do_lower_case) happens in ``tokenizer``, not here."""
        text = self.pipeline.resolve_prompt(prompt, prompt_name)
        if not text:  # "" is no prompt, as in sentence-transformers
            return list(texts), 0
        ids, _ = self.tokenizer.tokenize_ids([text])
        return [text + t for t in texts], prompt_token_count(ids[0], self.tokenizer.spec.special_ids)

    def pool(self, store: TokenStore, pooling: str | None = None, normalize: bool | None = None, *,
             prompt_length: int = 0) -> np.ndarray:
        """Sentence vectors (n, dim) float32 of an encoded store, text k in row k (``store.order``),
        by the pipeline (``pooling`` / ``normalize`` as in ``embed``): for callers that encoded
        deduplicated texts themselves. Texts for a model with prompts or do_lower_case must have
        gone through ``prompt_inputs`` and ``tokenizer`` first; ``prompt_length``: what
        ``prompt_inputs`` returned."""
        return self._pool_store(store, self._pipeline(pooling, normalize), prompt_length)

    def _check(self, pooling: str | None) -> None:
        if pooling is not None:
            check_mode(pooling)
        if self.encoder.layer == "all":
            raise ValueError("sentence embeddings need a single layer, not layer='all'")

    def _pipeline(self, pooling: str | None, normalize: bool | None) -> SentencePipeline:
        self._check(pooling)
        return self.pipeline.override(pooling, normalize)

    def _pool_store(self, store: TokenStore, pipeline: SentencePipeline, prompt_length: int) -> np.ndarray:
        store = store.to_host()  # the device path pools per batch instead (embed_unique)
        if len(store) == 0:
            return np.zeros((0, pipeline.output_dim(self.encoder.hidden_size)), dtype=np.float32)
        vectors = pipeline.apply_flat(store.embeddings, store.offsets, prompt_length)
        return vectors[store.order]

    def _pool_batches(self, ids: list[np.ndarray], pipeline: SentencePipeline, prompt_length: int,
                      progress: bool) -> np.ndarray:
        """Sentence vectors made per batch on the model's device (memory: a few batches of hidden
        states plus the (n, dim) result); one copy to the host at the end. Padding and copies of
        the next batches, and pooling of the last ones, overlap the model
        (``device.chunk_pipeline.run_overlapped``) when there is more than one batch."""
        import torch

        encoder = self.encoder
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        batches = encoder.runtime.batch_plan(lengths, encoder.batch_tokens, encoder.max_batch_size)
        out: list = [None]

        def prepared() -> Iterator[PaddedBatch]:
            shown = batches
            if progress:  # the one policy (rapidscore.common.progress): a bar after a second of work
                from rapidscore.common.progress import progress_bar

                shown = progress_bar(batches, desc="encoding", unit="batch", leave=False)
            for batch in shown:
                input_ids, attention_mask = pad_batch([ids[k] for k in batch], encoder.spec.pad_id)
                yield PaddedBatch(input_ids, attention_mask, encoder.runtime.to_device(np.ascontiguousarray(batch)))

        def pool(item: PaddedBatch, hidden) -> None:
            vectors = pipeline.apply_padded(hidden, item.attention_mask, prompt_length, encoder.runtime.to_device)
            if out[0] is None:
                out[0] = torch.zeros((len(ids), vectors.shape[-1]), dtype=torch.float32, device=hidden.device)
            out[0][item.rows] = vectors

        run_overlapped(encoder, prepared(), pool, overlap=len(batches) > 1)
        if out[0] is None:
            return np.zeros((0, pipeline.output_dim(encoder.hidden_size)), dtype=np.float32)
        return out[0].cpu().numpy()

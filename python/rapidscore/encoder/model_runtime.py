"""``ModelRuntime``: one loaded model at work: its runner (and the lock of a runner that is not
thread-safe), the unpadded graph where its capability table has one, batch planning and the model
run over batches (``encoder/forward.py``), with the token vectors put in place; or, for a model
with an output head of its own (the sequence classifier), one row per sequence.

``Encoder.runtime`` is one; the device engines and the sentence path call it directly;
``SequenceClassifier.runtime`` is another.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from rapidscore.encoder.cache import LoadArgs, LoadedModel, load_model
from rapidscore.encoder.forward import lock_of, run_batches, run_unpadded
from rapidscore.encoder.model_source import unpadded_supported
from rapidscore.encoder.runtime import capabilities
from rapidscore.encoder.runtime.capabilities import RUNNER_MEMBERS, Runner
from rapidscore.encoder.tokens.batching import equal_length_batches, pad_batch, plan_batches

__all__ = ["ModelRuntime"]


class ModelRuntime:
    """The loaded model ``loaded`` at work on ``device`` (see the module): an encoder's
    (:meth:`for_encoder`), or a model with an output head of its own, one row per sequence (the
    sequence classifier: :meth:`output_rows`).

    ``hidden_size``: the width of its vectors (a head's rows); ``pad_id``: the padding token id;
    ``roberta_positions``, ``unpadded_args``: what the unpadded graph needs (its ``load_model``
    arguments, None where it does not run)."""

    def __init__(self, loaded: LoadedModel, device: str, *, hidden_size: int, pad_id: int,
                 roberta_positions: bool = False, unpadded_args: LoadArgs | None = None) -> None:
        self.loaded = loaded
        self.device, self.hidden_size = device, hidden_size
        self.pad_id, self.roberta_positions = pad_id, roberta_positions
        # ConvBERT-like models read the padding: their batches hold sentences of one length only.
        self.padding_sensitive = loaded.padding_sensitive
        self._unpadded_load_args = unpadded_args
        # The unpadded graph's loaded model, held (not only its runner) so that the model cache finds
        # it again after its LRU dropped it: another encoder then shares this session, not a new copy
        self._unpadded: LoadedModel | None = None
        self._unpadded_runner: Any = None
        # The loaded model's runner; a CPU ONNX Runtime session is made on first use (``runner``).
        self._runner: Any = None
        self._runner_lock: threading.Lock | None = None
        if loaded.runner_created:
            self._use(loaded.runner)

    @classmethod
    def for_encoder(cls, loaded: LoadedModel, load_args: LoadArgs, *, config: dict, hidden_size: int, pad_id: int,
                    roberta_positions: bool) -> ModelRuntime:
        """An encoder's runtime: ``load_args``, ``load_model``'s arguments of ``loaded``; ``config``,
        the model's config.json. The unpadded graph (``embed_ids(unpadded=True)``) is loaded on
        first use where the backend's table runs it on this device (fp32 only: int8 scales its
        activations per batch)."""
        _, layer, backend, device, precision = load_args[:5]
        unpadded = device in capabilities(backend).unpadded and precision == "fp32" and \
            unpadded_supported(config, layer)
        return cls(loaded, device, hidden_size=hidden_size, pad_id=pad_id, roberta_positions=roberta_positions,
                   unpadded_args=load_args if unpadded else None)

    @property
    def runner(self) -> Runner:
        """What runs the model (``rapidscore.encoder.runtime.Runner``); assignable (see ``Encoder.runner``)."""
        runner = self._runner
        if runner is None:
            runner = self.loaded.runner
            self._use(runner)
        return runner

    @runner.setter
    def runner(self, runner: Runner) -> None:
        missing = [name for name in RUNNER_MEMBERS if not hasattr(runner, name)]
        if missing:  # (a runner derives from runtime.RunnerBase, which has every member)
            raise TypeError(f"a runner needs the members {', '.join(missing)} of the Runner contract "
                            f"(derive it from rapidscore.encoder.runtime.RunnerBase), got {type(runner).__name__}")
        # (Compared without making the loaded model's session: a substitute needs none.)
        if not (self.loaded.runner_created and runner is self.loaded.runner):
            self._unpadded_load_args = None  # another graph: every call goes through it, padded
        self._use(runner)

    def _use(self, runner: Runner) -> None:
        # Serialises calls of a runner that says it is not thread-safe (shared by its encoders).
        self._runner_lock = None if runner.thread_safe else lock_of(runner)
        self._runner = runner

    @property
    def runs_torch(self) -> bool:
        """The runner returns torch tensors (the torch backend; ONNX Runtime's IOBinding on CUDA)."""
        # A runner not made yet is a CPU ONNX Runtime session (the only kind made on first use): numpy out.
        return self._runner is not None and self._runner.returns == "torch"

    @property
    def returns_tensors(self) -> bool:
        """Token embeddings stay on the model's device as torch tensors (torch on a GPU)."""
        return self.runs_torch and self.device != "cpu"

    @property
    def unpadded_available(self) -> bool:
        """Whether ``Encoder.embed_ids(unpadded=True)`` runs the unpadded graph here (a backend whose
        table runs it on this device, a BERT-style family at a single layer >= 1, fp32, the
        encoder's own runner)."""
        return self._unpadded_load_args is not None

    @property
    def packed_available(self) -> bool:
        """Whether the runner has a packed (unpadded) forward for this model and layer
        (``TorchRunner.packed``, ``rapidscore.device.packed``): the device engines use it when
        the encoder was made with ``unpadded=True``."""
        return self.runs_torch and self.runner.packed

    def to_device(self, array: np.ndarray) -> Any:
        """A host array as a torch tensor on the model's device (the runner's ``to_device``)."""
        return self.runner.to_device(array)

    def batch_plan(self, lengths: np.ndarray, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
        """Batches (index arrays) of sequences of ``lengths`` under the token budget: length-sorted,
        or of one length each where the model reads the padding (``padding_sensitive``)."""
        plan = equal_length_batches if self.padding_sensitive else plan_batches
        return plan(lengths, batch_tokens, max_batch_size)

    def run_model(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any:
        """The runner over one padded batch (under the runner's lock where it is not thread-safe)."""
        runner = self.runner
        if self._runner_lock is None:
            return runner(input_ids, attention_mask)
        with self._runner_lock:
            return runner(input_ids, attention_mask)

    def run_packed(self, ids: list[np.ndarray]) -> Any:
        """The runner's packed forward over non-empty token id sequences: (tokens, dim), sentence
        after sentence (``TorchRunner.run_packed``; ``packed_available`` says where it exists)."""
        run_packed = self.runner.run_packed
        if self._runner_lock is None:
            return run_packed(ids)
        with self._runner_lock:
            return run_packed(ids)

    def output_rows(self, ids: list[np.ndarray], *, batch_tokens: int, max_batch_size: int) -> np.ndarray:
        """One row (``hidden_size`` wide) of a model with an output head of its own per token id
        sequence of ``ids``, float32 on the host, in the order of ``ids``: batch by batch under the
        token budget (``batch_plan``), right padded (the sequence classifier's logits)."""
        out = np.empty((len(ids), self.hidden_size), dtype=np.float32)
        if not ids:
            return out
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        for batch, _, rows in self.hidden_batches(ids, self.batch_plan(lengths, batch_tokens, max_batch_size),
                                                  progress=False):
            out[batch] = rows if isinstance(rows, np.ndarray) else rows.cpu().numpy()
        return out

    def hidden_batches(self, ids, batches, progress: bool) -> Iterator[tuple[Any, np.ndarray, Any]]:
        """(batch, attention mask, hidden states) per batch of ``batches`` (``batch_plan``): the
        model run over the token ids ``ids[k]`` of the batch, right padded."""
        if progress:  # the one policy (rapidscore.common.progress): a bar after a second of work
            from rapidscore.common.progress import progress_bar

            batches = progress_bar(batches, desc="encoding", unit="batch", leave=False)
        for batch in batches:
            input_ids, attention_mask = pad_batch([ids[k] for k in batch], self.pad_id)
            yield batch, attention_mask, self.run_model(input_ids, attention_mask)

    def embed(self, ids, lengths: np.ndarray, offsets: np.ndarray, destinations: list[np.ndarray] | None, *,
              batch_tokens: int, max_batch_size: int, progress: bool, keep_on_device: bool, unpadded: bool) -> Any:
        """Token vectors (offsets[-1] rows) of the model inputs ``ids`` (``lengths``; ``destinations``:
        windows' rows, ``forward.place_batch``): through the unpadded graph where asked for and
        available (host arrays only), else batch by batch under the token budget."""
        if unpadded and self.unpadded_available and not keep_on_device:
            runner = self._unpadded_runner
            if runner is None:
                assert self._unpadded_load_args is not None  # unpadded_available
                self._unpadded = load_model(*self._unpadded_load_args, unpadded=True)[0]
                runner = self._unpadded_runner = self._unpadded.runner
            return run_unpadded(runner, ids, lengths, offsets, destinations, hidden_size=self.hidden_size,
                                batch_tokens=batch_tokens, max_batch_size=max_batch_size, pad_id=self.pad_id,
                                roberta_positions=self.roberta_positions)
        batches = self.batch_plan(lengths, batch_tokens, max_batch_size)
        return run_batches(self, ids, lengths, offsets, batches, progress, keep_on_device, destinations)

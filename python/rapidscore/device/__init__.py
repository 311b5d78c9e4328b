"""The device path: what runs when the arrays live on an accelerator, in one package.

With ``backend="torch"`` the token embeddings can stay torch tensors where the model runs (a
GPU) from the model's output to P, R and F, and only the scores cross to the host. Everything
that path needs is here:

- :mod:`~rapidscore.device.engine`: BERTScore's device engine (``score_on_device``): chunks of
  pairs under a token budget, tokenised in a background thread, encoded, matched and dropped;
- :mod:`~rapidscore.device.chunk_pipeline`: the four overlapped stages (prepare, model, put away,
  finish) that keep the host's work out of the model's way; sentence vectors use them too;
- :mod:`~rapidscore.device.packed`: the packed (unpadded) forward of the torch runner;
- :mod:`~rapidscore.device.cuda_graphs`: small batches through captured CUDA graphs;
- :mod:`~rapidscore.device.matching_torch`: greedy matching on torch tensors, any device;
- :mod:`~rapidscore.device.tf32`: the process-wide switches the torch runner holds while it runs:
  TF32 off (CUDA matrix products in exact fp32), cuDNN's attention off (a plan per batch shape).

The same code runs on CPU tensors (``BERTScore(backend="torch", device="cpu",
device_engine=True)``): that twin is how CI exercises the GPU path without a GPU, and
``rapidscore.testing.simulated_device`` makes the CPU as slow as a device to measure the
overlap.

Layering: the room sits at the level of the encoder and the kernels, which reach into it for the
parts that only exist for tensors (the torch runner uses ``packed``, ``cuda_graphs`` and ``tf32``;
the matching dispatcher uses ``matching_torch`` for a tensor), while ``chunk_pipeline`` and
``packed`` use the encoder's batching and model code: module by module, never in a cycle
(tests/common/test_import_graph.py). The engine is BERTScore's and sits at the metrics' level: it
uses the finishing helpers that ``BERTScore.finish`` and the service's ``finish_plans`` share
(``bertscore/finishing.py``), which stay in the metric's package because they are BERTScore's
(idf, rescaling, the result); ``bertscore/scorer.py`` imports the engine only when it runs it.

Nothing is imported here, so ``import rapidscore.device.x`` loads only what x needs, and none of
these modules imports torch before it is called.
"""

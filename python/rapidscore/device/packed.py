"""The packed forward of the torch backend: a batch's real tokens only, no padding.

For the families of ``model_source.UNPADDED_FAMILIES`` (BERT, RoBERTa, XLM-RoBERTa, CamemBERT,
ELECTRA; absolute positions), with the weights of the loaded (truncated) Hugging Face model. The
input is ``batching.unpadded_inputs``'s feed as tensors on the model's device: the T real tokens
of B sentences, sentence after sentence; the output is their hidden states (T, dim). The
embeddings, every linear layer, layer norm and activation run on the T rows through the helpers
the unpadded ONNX graph is built from (``torch_model.unpadded_embeddings`` / ``unpadded_layer``:
token type 0, the feed's positions, RoBERTa's included, ELECTRA's embedding projection, the
family's activation). Only attention needs sentence boundaries, through PyTorch's
``scaled_dot_product_attention`` (SDPA) with the family's scaling, in one of two layouts:

``"jagged"``
    q, k and v as nested jagged tensors ((B, heads, j, size) views of the (T, heads, size) rows,
    ``torch.nested.nested_tensor_from_jagged`` over the sentences' offsets, ``max_seqlen`` given
    so that no kernel reads it back from the device): no padding anywhere. On CUDA SDPA runs the
    variable-length flash kernel (fp16/bf16) or the memory-efficient one (fp32, as the padded
    runner's SDPA with its mask does; TF32 off under ``exact_fp32``): read from torch's source,
    not yet run on a GPU (``test_cuda_packed_matches_padded`` checks it where CUDA is). With
    torch 2.13 on the CPU it works and is exact, but only through SDPA's math fallback, which
    converts q, k and v to strided nested tensors sentence by sentence (a prototype-API
    UserWarning once, a host sync per layer): 1.34x the padded layout's time there. Its tensors
    must be made under the same ``inference_mode`` as the call ("Cannot set version_counter for
    inference tensor" otherwise): the offsets are computed here, inside it, from
    ``attention_mask``.
``"padded"``
    q, k and v gathered into (B, heads, L, size), padding rows zero, SDPA with a boolean key
    mask (B, 1, 1, L), the context scattered back to the T rows. Works everywhere; the padding
    costs only in attention (O(B L^2 size) of an O(T dim^2) forward).

``attention="auto"`` (what ``TorchRunner.run_packed`` uses) takes "jagged" on CUDA, where the
flash kernel skips the padding and needs no mask, and "padded" on the CPU. On the CPU the packed
forward buys little over length-sorted padded batches, which pad little: measured on a 2-core
AMD EPYC (torch 2.13, fp32, 2 threads, all-MiniLM-L6-v2 at layer 6, 2,000 texts of 3-81 tokens,
85,463 tokens; each chunk's best of 3 runs, summed, on a shared machine): with a budget of
2,048 tokens a chunk, the padded Hugging Face forward 9.77 s (44 batches, 2.9 % padding), packed
"padded" 9.76 s, packed "jagged" 13.06 s; 512 tokens: 10.13 s against 10.31 s; 8,192 tokens
(10 % padding): 11.96 s against 10.92 s. In fp32 every token vector is within 1e-5 of the
padded Hugging Face forward's on the CPU in both layouts: at most 5.7e-6 over those 2,000 texts,
about what the padded forward's own vectors move with the batch a sentence is in (3.6e-6).

torch is imported inside the functions: importing this module does not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["ATTENTIONS", "packed_supported", "check_packed", "default_attention", "packed_feed", "packed_hidden"]

#: the attention layouts of :func:`packed_hidden`
ATTENTIONS = ("padded", "jagged")


def packed_supported(model, layer: int | str) -> bool:
    """Whether the packed forward covers ``model`` (a loaded Hugging Face encoder) read at
    ``layer``: a family of ``UNPADDED_FAMILIES`` with absolute positions and an int layer >= 1
    (not "all", not the embedding output)."""
    from rapidscore.encoder.model_source import unpadded_supported

    return (unpadded_supported(model.config.to_dict(), layer)
            and not getattr(model, "rapidscore_embedding_output", False))


def check_packed(model, layer: int | str) -> None:
    """A ValueError naming the model type and layer where the packed forward does not apply."""
    if packed_supported(model, layer):
        return
    from rapidscore.encoder.model_source import UNPADDED_FAMILIES

    config = model.config
    raise ValueError(
        f"the packed forward does not cover model type {config.model_type!r} at layer {layer!r} "
        f"(position embeddings {getattr(config, 'position_embedding_type', 'absolute')!r}): it covers "
        f"{', '.join(sorted(UNPADDED_FAMILIES))} with absolute positions at a layer >= 1; "
        "use the padded forward")


def default_attention(device: torch.device | str) -> str:
    """The attention layout ``attention="auto"`` takes on ``device``: "jagged" on CUDA,
    "padded" elsewhere (see the module doc)."""
    import torch

    return "jagged" if torch.device(device).type == "cuda" else "padded"


def packed_feed(model, ids: list[np.ndarray]) -> dict[str, np.ndarray]:
    """``batching.unpadded_inputs`` of the non-empty token id sequences ``ids`` for ``model``:
    RoBERTa-style positions (``model_source.ROBERTA_LIKE``) numbered from the model's
    ``pad_token_id``, as its padded forward numbers them."""
    from rapidscore.encoder.model_source import ROBERTA_LIKE
    from rapidscore.encoder.tokens.batching import unpadded_inputs

    config = model.config
    pad_id = config.pad_token_id if config.pad_token_id is not None else 0
    return unpadded_inputs(ids, int(pad_id), config.model_type in ROBERTA_LIKE)


def packed_hidden(model, feed: dict[str, torch.Tensor], layer: int | None = None, *,
                  attention: str = "auto") -> torch.Tensor:
    """Hidden states (T, dim) of the T real tokens of ``feed``, in the model's dtype.

    ``feed``: ``batching.unpadded_inputs``'s arrays as int64 tensors on the model's device
    (``input_ids``, ``position_ids``, ``gather``, ``scatter``, ``attention_mask``). ``layer``: the
    output of which layer, 1 up to the layers the model keeps (None: the last it keeps, which
    is bert-score's layer for a model that ``load_truncated_model`` cut). ``attention``: "auto",
    "padded" or "jagged" (module doc). Run it under ``torch.inference_mode`` or ``no_grad`` (and
    ``exact_fp32`` for exact fp32 on CUDA) as the caller's padded forward runs. The model must
    pass :func:`check_packed` (a ValueError naming the model type otherwise).
    """
    from rapidscore.encoder.torch_model import unpadded_embeddings, unpadded_layer

    layers = model.encoder.layer if hasattr(model, "encoder") else []
    count = len(layers) if layer is None else layer
    check_packed(model, count)
    if not 1 <= count <= len(layers):
        raise ValueError(f"layer must be between 1 and {len(layers)} for this {model.config.model_type} model "
                         f"(the layers it keeps), got {layer}")
    input_ids = feed["input_ids"]
    if attention == "auto":
        attention = default_attention(input_ids.device)
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be 'auto', 'padded' or 'jagged', got {attention!r}")
    if attention == "padded":
        attend = _padded_attention(feed["gather"], feed["scatter"], feed["attention_mask"])
    else:
        attend = _jagged_attention(feed["attention_mask"], int(feed["gather"].shape[1]))
    hidden = unpadded_embeddings(model, input_ids, feed["position_ids"])
    for module in list(layers)[:count]:
        hidden = unpadded_layer(module, hidden, attend)
    return hidden[0]


def _padded_attention(gather: torch.Tensor, scatter: torch.Tensor, attention_mask: torch.Tensor):
    """SDPA over (B, heads, L, size) gathered from the packed rows, a boolean key mask."""
    import torch

    batch, longest = gather.shape
    keys = attention_mask.bool()[:, None, None, :]

    def attend(module, hidden: torch.Tensor) -> torch.Tensor:
        heads, size = module.num_attention_heads, module.attention_head_size
        rows = hidden.shape[1]

        def padded(x: torch.Tensor) -> torch.Tensor:
            x = torch.cat([x[0], x.new_zeros(1, x.shape[-1])], 0)[gather]
            return x.view(batch, longest, heads, size).transpose(1, 2)

        query, key, value = (padded(projection(hidden)) for projection in (module.query, module.key, module.value))
        context = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=keys,
                                                                   scale=module.scaling)
        return context.transpose(1, 2).reshape(batch * longest, heads * size)[scatter].view(1, rows, heads * size)

    return attend


def _jagged_attention(attention_mask: torch.Tensor, longest: int):
    """SDPA over nested jagged (B, heads, j, size) views of the packed rows."""
    import torch

    lengths = attention_mask.sum(1)
    offsets = torch.nn.functional.pad(lengths.cumsum(0), (1, 0))  # made here: under the caller's inference mode

    def attend(module, hidden: torch.Tensor) -> torch.Tensor:
        heads, size = module.num_attention_heads, module.attention_head_size
        rows = hidden.shape[1]

        def nested(x: torch.Tensor) -> torch.Tensor:
            values = x.view(rows, heads, size)
            return torch.nested.nested_tensor_from_jagged(values, offsets, max_seqlen=longest).transpose(1, 2)

        query, key, value = (nested(projection(hidden)) for projection in (module.query, module.key, module.value))
        context = torch.nn.functional.scaled_dot_product_attention(query, key, value, scale=module.scaling)
        return context.transpose(1, 2).values().reshape(1, rows, heads * size)

    return attend

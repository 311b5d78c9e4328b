"""Loading a Hugging Face encoder truncated to its first N layers (torch needed).

"Layer N" is hidden_states[N] of the full model (0 = embedding output), the convention of
BERTScore: the model keeps its first N transformer layers and its last output is used.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rapidscore.encoder.model_source import ROBERTA_LIKE
from rapidscore.encoder.tokenization import TokenizerSpec

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedTokenizerBase


def _layer_list_owner(model):
    """The module holding the ModuleList of transformer layers, and that attribute's name."""
    for owner_name, attr in (("encoder", "layer"), ("transformer", "layer"), ("encoder", "layers")):
        owner = getattr(model, owner_name, None)
        if owner is not None and hasattr(owner, attr):
            return owner, attr
    raise ValueError(f"do not know how to truncate the layers of {type(model).__name__}")


def load_truncated_model(model_dir: Path, layer: int | None, all_layers: bool = False,
                         attention: str = "eager") -> torch.nn.Module:
    """The model in eval mode, cut to ``layer`` transformer layers (all when None or all_layers).

    ``attention``: "eager" (what the ONNX export traces) or "sdpa" (PyTorch's fused
    scaled-dot-product attention, for the torch runner); a family without SDPA support loads
    with eager attention instead (``model.config._attn_implementation`` says which ran)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    if attention not in ("eager", "sdpa"):
        raise ValueError(f"attention must be 'eager' or 'sdpa', got {attention!r}")
    hf_logging.disable_progress_bar()  # a library call should not draw transformers' load bars
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = AutoModel.from_pretrained(
                str(model_dir), trust_remote_code=False, use_safetensors=_has_safetensors(model_dir),
                attn_implementation=attention,
            )
        except (ValueError, ImportError):
            if attention == "eager":
                raise
            # transformers refuses SDPA for families that do not implement it: load them eagerly
            model = AutoModel.from_pretrained(
                str(model_dir), trust_remote_code=False, use_safetensors=_has_safetensors(model_dir),
                attn_implementation="eager",
            )
    if hasattr(model, "get_encoder") and getattr(model.config, "is_encoder_decoder", False):
        model = model.get_encoder()
    if layer is not None and not all_layers:
        owner, attr = _layer_list_owner(model)
        layers = getattr(owner, attr)
        # Some encoders (DeBERTa-v2) fail with zero layers: layer 0 keeps one and reads
        # hidden_states[0] (see hidden_state_of).
        setattr(owner, attr, torch.nn.ModuleList(list(layers)[:max(layer, 1)]))
    return model.eval()


def hidden_state_of(model, input_ids, attention_mask, layer: int | str) -> torch.Tensor:
    """Output of the truncated model: last hidden state, hidden_states[0] for layer 0, or every
    hidden state stacked on a leading axis for layer "all"."""
    import torch

    needs_all = layer == "all" or layer == 0
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=needs_all)
    if layer == "all":
        return torch.stack(tuple(out.hidden_states), dim=0)
    if layer == 0:
        return out.hidden_states[0]
    return out[0]


def _has_safetensors(model_dir: Path) -> bool:
    return (Path(model_dir) / "model.safetensors").is_file()


class LayerOutput:
    """Factory for the module exported to ONNX: (input_ids, attention_mask) -> embeddings."""

    @staticmethod
    def build(model, layer: int | str) -> torch.nn.Module:
        import torch

        class _Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                return hidden_state_of(self.model, input_ids, attention_mask, layer)

        return _Wrapped().eval()


def load_tokenizer(model_dir: Path,
                   add_prefix_space: bool | None) -> tuple[PreTrainedTokenizerBase, PretrainedConfig]:
    """The fast tokenizer of a model.

    ``add_prefix_space`` None keeps the tokenizer as saved. That is what bert-score 0.3.13 does
    under transformers 5: its ``add_prefix_space=True`` encode argument for RoBERTa is dropped
    there, so no prefix space is added. True reproduces transformers-4-era slow RoBERTa tokenizers.
    """
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)
    kwargs = {"use_fast": True, "trust_remote_code": False}
    if add_prefix_space is not None:
        kwargs["add_prefix_space"] = bool(add_prefix_space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), **kwargs)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"model {model_dir} has no fast tokenizer (tokenizer.json); rapidscore needs one")
    return tokenizer, config


def tokenizer_spec(tokenizer, config) -> TokenizerSpec:
    max_length = int(tokenizer.model_max_length)
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        # RoBERTa-style position ids start after the padding index.
        usable = positions - (config.pad_token_id + 1 if config.model_type in ROBERTA_LIKE else 0)
        if max_length > 10**6 or max_length > usable:
            max_length = usable
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return TokenizerSpec(
        max_length=max_length, pad_id=int(pad_id),
        special_ids=tuple(sorted(int(i) for i in tokenizer.all_special_ids)),
        cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
    )


class UnpaddedLayerOutput:
    """Factory for the unpadded ONNX graph: the same layers as ``LayerOutput`` over the real tokens
    of a batch only.

    Inputs: ``input_ids`` and ``position_ids`` (T,) for the batch's T real tokens, sentence after
    sentence; ``gather`` (B, L) the row of each padded slot in [0, T], T for padding; ``scatter``
    (T,) the padded slot of each token; ``attention_mask`` (B, L). Output: (T, dim).

    Every linear layer, layer norm and activation runs on the T real tokens (no padding, one call
    for sentences of any lengths); only attention runs padded, as the padded graph runs it. Each
    operation is the padded graph's on the same rows (3-D tensors keep linear layers a MatMul and
    an Add, as there; a 2-D Gemm adds the bias first and rounds differently), so a token's vector
    is bit-identical to the padded graph's under ONNX Runtime on the CPU (tests/encoder).
    """

    @staticmethod
    def build(model) -> torch.nn.Module:
        import torch

        class _Unpadded(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids, position_ids, gather, scatter, attention_mask):
                model = self.model
                hidden = model.embeddings(input_ids=input_ids[None], position_ids=position_ids[None],
                                          token_type_ids=torch.zeros_like(input_ids)[None])
                if hasattr(model, "embeddings_project"):  # ELECTRA: embedding size != hidden size
                    hidden = model.embeddings_project(hidden)
                batch, longest = gather.shape
                mask = (1.0 - attention_mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
                for layer in model.encoder.layer:
                    attention = layer.attention.self
                    heads, size = attention.num_attention_heads, attention.attention_head_size

                    def padded(x, heads=heads, size=size):
                        rows = torch.cat([x[0], x.new_zeros(1, x.shape[-1])], 0)[gather]
                        return rows.view(batch, longest, heads, size).transpose(1, 2)

                    query, key = padded(attention.query(hidden)), padded(attention.key(hidden))
                    value = padded(attention.value(hidden))
                    weights = torch.matmul(query, key.transpose(2, 3)) * attention.scaling + mask
                    weights = torch.nn.functional.softmax(weights, dim=-1)
                    context = torch.matmul(weights, value).transpose(1, 2).contiguous()
                    context = context.reshape(batch * longest, heads * size)[scatter][None]
                    attended = layer.attention.output(context, hidden)
                    hidden = layer.output(layer.intermediate(attended), attended)
                return hidden[0]

        return _Unpadded().eval()


"""Loading a Hugging Face encoder truncated to its first N layers (torch needed).

"Layer N" follows bert-score: the model keeps its first N transformer layers and its first output
is used. That is hidden_states[N] of the full model for BERT-style encoders; for encoders that end
with a norm (T5, Pegasus, Blenderbot, ModernBERT) the norm applies to layer N's output too.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rapidscore.encoder.model_source import ROBERTA_LIKE, UnsafeWeightsError, from_pretrained
from rapidscore.encoder.tokens.tokenization import TokenizerSpec

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedTokenizerBase


def layer_count(model) -> int:
    """Depth of a loaded encoder, from its config (T5's num_layers, BART's encoder_layers, XLNet's
    n_layer, ...; ProphetNet's num_hidden_layers counts its decoder too)."""
    from rapidscore.encoder.model_source import num_layers

    return num_layers(model.config.to_dict())


def layer_lists(model, depth: int) -> list:
    """The (owner, attribute) of every ModuleList that holds one entry per layer: ModuleLists of
    ``depth`` modules of one class, outermost first (not those inside a layer). One for most
    families (BERT's encoder.layer, T5's encoder.block, BART's layers, XLNet's layer); XLM keeps
    four parallel ones (attentions, ffns and two layer norms)."""
    import torch

    found = []

    def visit(module) -> None:
        for name, child in module.named_children():
            if (isinstance(child, torch.nn.ModuleList) and len(child) == depth
                    and len({type(entry) for entry in child}) == 1):
                found.append((module, name))
            else:
                visit(child)

    visit(model)
    return found


def truncate_layers(model, layer: int) -> None:
    """Keep the first ``layer`` layers, as bert-score 0.3.13 does for each family.

    Found from the model's structure: every per-layer ModuleList is cut; a module that counts its
    layers instead of iterating a list (XLM's ``n_layers``) gets the new count, and so does the
    config, which ALBERT's shared layer groups are run by (bert-score sets
    ``config.num_hidden_layers`` there: with several groups that also changes which group a
    layer uses, and the drop-in reproduces it)."""
    import torch

    depth = layer_count(model)
    if not 0 <= layer <= depth:
        raise ValueError(f"layer must be between 0 and {depth} for this {model.config.model_type} model, got {layer}")
    lists = layer_lists(model, depth)
    counters = [(module, name) for module in model.modules() for name in ("n_layers", "num_layers")
                if type(getattr(module, name, None)) is int and getattr(module, name) == depth]
    shares_layers = hasattr(model.config, "num_hidden_groups")  # ALBERT: groups run num_hidden_layers times
    if not lists and not counters and not shares_layers:
        raise ValueError(f"cannot find the layers of {type(model).__name__} (model type "
                         f"{model.config.model_type!r}) to keep the first {layer}; please report this model")
    for owner, name in lists:
        setattr(owner, name, torch.nn.ModuleList(list(getattr(owner, name))[:layer]))
    for module, name in counters:
        setattr(module, name, layer)
    if shares_layers:
        model.config.num_hidden_layers = layer


def load_truncated_model(model_dir: Path, layer: int | None, all_layers: bool = False,
                         attention: str = "eager") -> torch.nn.Module:
    """The model in eval mode as bert-score 0.3.13 builds it: AutoModel (T5's encoder-only class
    for T5 families), the encoder of an encoder-decoder, cut to ``layer`` layers (all when None
    or all_layers).

    ``attention``: "eager" (what the ONNX export traces) or "sdpa" (PyTorch's fused
    scaled-dot-product attention, for the torch runner); a family without SDPA support loads
    with eager attention instead (``model.config._attn_implementation`` says which ran)."""
    if attention not in ("eager", "sdpa"):
        raise ValueError(f"attention must be 'eager' or 'sdpa', got {attention!r}")
    model = _load_encoder(model_dir, attention)
    if layer is not None and not all_layers:
        truncate_layers(model, layer)
        if layer == 0 and not _runs(model):
            # Some encoders (DeBERTa-v2) fail with zero layers: keep one and read hidden_states[0]
            # (see hidden_state_of); bert-score cannot score them at layer 0 at all.
            model = _load_encoder(model_dir, attention)
            truncate_layers(model, 1)
            model.rapidscore_embedding_output = True
    return model.eval()


def _load_encoder(model_dir: Path, attention: str):
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a library call should not draw transformers' load bars
    config = load_config(model_dir)
    # bert-score loads T5-family models with the encoder-only class (AutoModel's T5Model wants
    # decoder inputs); the encoder is the same module either way.
    model_class = (transformers.T5EncoderModel if config.model_type in ("t5", "mt5", "umt5")
                   else transformers.AutoModel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = from_pretrained(model_class, model_dir, attn_implementation=attention)
        except UnsafeWeightsError:
            raise  # a ValueError too, but no other attention would load it
        except (ValueError, ImportError):
            if attention == "eager":
                raise
            # transformers refuses SDPA for families that do not implement it: load them eagerly
            model = from_pretrained(model_class, model_dir, attn_implementation="eager")
    if hasattr(model, "decoder") and hasattr(model, "encoder"):  # bert-score's test, word for word
        model = model.encoder
    return model.eval()


def load_config(model_dir: Path) -> PretrainedConfig:
    """The model's transformers config; a model type this transformers does not ship (or only with
    remote code) is a ValueError that names it."""
    import transformers

    try:
        return transformers.AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)
    except (KeyError, ValueError) as exc:
        from rapidscore.encoder.model_source import read_config

        model_type = read_config(model_dir).get("model_type")
        raise ValueError(
            f"transformers {transformers.__version__} cannot build model type {model_type!r} ({model_dir}) without "
            f"remote code, so rapidscore cannot run it: use a family of docs/bertscore.md's 'Supported model "
            f"families', or a transformers release that ships {model_type!r} ({type(exc).__name__}: {exc})") from exc


def _runs(model) -> bool:
    """Whether a forward pass of the (truncated) model works on a two-token input."""
    import torch

    try:
        with torch.inference_mode():
            model(input_ids=torch.ones((1, 2), dtype=torch.long), attention_mask=torch.ones((1, 2), dtype=torch.long))
    except Exception:
        return False
    return True


def padding_sensitive(model) -> bool:
    """Whether a sentence's output depends on the padding beside it: a convolution along the
    sequence (ConvBERT's span-based dynamic convolution) reads pad positions, which attention
    masks out elsewhere. Pointwise (kernel 1) convolutions, as SqueezeBERT's, do not."""
    import torch

    return any(isinstance(m, torch.nn.Conv1d) and m.kernel_size[0] > 1 for m in model.modules())


def hidden_state_of(model, input_ids, attention_mask, layer: int | str) -> torch.Tensor:
    """Output of the truncated model as bert-score reads it: the first output, or every hidden
    state stacked on a leading axis for layer "all" (hidden_states[0] for layer 0 of a model that
    cannot run without layers)."""
    import torch

    if layer == "all":
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return torch.stack(tuple(_hidden_states(out)), dim=0)
    if getattr(model, "rapidscore_embedding_output", False):
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return _hidden_states(out)[0]
    return model(input_ids=input_ids, attention_mask=attention_mask)[0]


def _hidden_states(out):
    """The hidden states of a model output; XLNet's two-stream layers give (h, g) pairs, of which
    the content stream h is the encoder-only output."""
    return [h[0] if isinstance(h, tuple) else h for h in out.hidden_states]


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
    """The tokenizer of a model: the Rust-backed one, or for families that have none (XLM,
    ProphetNet) transformers' Python one, as bert-score uses.

    ``add_prefix_space`` None keeps the tokenizer as saved. That is what bert-score 0.3.13 does
    under transformers 5: its ``add_prefix_space=True`` encode argument for RoBERTa is dropped
    there, so no prefix space is added. True reproduces transformers-4-era slow RoBERTa tokenizers.
    """
    from transformers import AutoTokenizer

    config = load_config(model_dir)
    kwargs = {"use_fast": True, "trust_remote_code": False}
    if add_prefix_space is not None:
        kwargs["add_prefix_space"] = bool(add_prefix_space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), **kwargs)
    tokenizer.padding_side = "right"  # as bert-score pads, and the runtime (XLNet's tokenizer pads left)
    return tokenizer, config


# Families without a position limit (XLNet, T5's relative positions) may have a tokenizer that
# never truncates (model_max_length 1e30); bert-score then truncates nothing, and neither does this.
UNLIMITED_LENGTH = 2**31 - 1


def tokenizer_spec(tokenizer, config) -> TokenizerSpec:
    max_length = min(int(tokenizer.model_max_length), UNLIMITED_LENGTH)
    positions = getattr(config, "max_position_embeddings", None)
    if positions and positions > 0:  # XLNet's config answers -1: no limit
        # RoBERTa-style position ids start after the padding index.
        usable = positions - (config.pad_token_id + 1 if config.model_type in ROBERTA_LIKE else 0)
        if max_length > 10**6 or max_length > usable:
            max_length = usable
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    # Only the tokens that frame a text are special: [UNK] (a text of emoji or an unseen script),
    # [MASK] and a vocabulary's extra tokens are content, as bert-score counts them.
    framing = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.bos_token_id,
               tokenizer.eos_token_id} - {None}
    return TokenizerSpec(
        max_length=max_length, pad_id=int(pad_id),
        special_ids=tuple(sorted(int(i) for i in framing)),
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
                hidden = unpadded_embeddings(model, input_ids, position_ids)
                batch, longest = gather.shape
                mask = (1.0 - attention_mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min

                def attend(attention, hidden):
                    heads, size = attention.num_attention_heads, attention.attention_head_size

                    def padded(x):
                        rows = torch.cat([x[0], x.new_zeros(1, x.shape[-1])], 0)[gather]
                        return rows.view(batch, longest, heads, size).transpose(1, 2)

                    query, key = padded(attention.query(hidden)), padded(attention.key(hidden))
                    value = padded(attention.value(hidden))
                    weights = torch.matmul(query, key.transpose(2, 3)) * attention.scaling + mask
                    weights = torch.nn.functional.softmax(weights, dim=-1)
                    context = torch.matmul(weights, value).transpose(1, 2).contiguous()
                    return context.reshape(batch * longest, heads * size)[scatter][None]

                for layer in model.encoder.layer:
                    hidden = unpadded_layer(layer, hidden, attend)
                return hidden[0]

        return _Unpadded().eval()


def unpadded_embeddings(model, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    """The embedding output (1, T, hidden) of T packed tokens (``input_ids``, ``position_ids``
    (T,), sentence after sentence) for a model of ``model_source.UNPADDED_FAMILIES``: token type 0
    as the padded model defaults to, RoBERTa-style positions as the feed numbers them, and
    ELECTRA's ``embeddings_project`` where its embedding size differs from the hidden size."""
    import torch

    hidden = model.embeddings(input_ids=input_ids[None], position_ids=position_ids[None],
                              token_type_ids=torch.zeros_like(input_ids)[None])
    if hasattr(model, "embeddings_project"):  # ELECTRA: embedding size != hidden size
        hidden = model.embeddings_project(hidden)
    return hidden


def unpadded_layer(layer, hidden: torch.Tensor, attend) -> torch.Tensor:
    """One BERT-style layer over packed tokens ``hidden`` (1, T, hidden): ``attend(self_attention,
    hidden)`` gives the attention context (1, T, heads * head size) (it runs the module's query,
    key and value projections and attends within each sentence); the attention output projection,
    the feed-forward block with the family's activation and both layer norms run on the T rows."""
    attended = layer.attention.output(attend(layer.attention.self, hidden), hidden)
    return layer.output(layer.intermediate(attended), attended)

"""The tiny model families and their transformers configs (``rapidscore.testing.tiny_models``).

The family tables and sizes every tiny model shares, and :func:`build_config`: the tiny config
of each family, sized to its tokenizer (:mod:`.tiny_tokenizers`). Importing this module is cheap
(transformers is imported when a config is built).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig

# The families every generic encoder test runs over.
FAMILIES = ("bert", "roberta", "deberta-v2", "xlm-roberta", "distilbert", "electra")
# The other families of bert-score 0.3.13's model table, and modern encoders beyond it; the
# parity suite (tests/bertscore/test_families.py) runs each against bert-score on both backends.
MORE_FAMILIES = ("deberta", "mpnet", "big_bird", "albert", "xlnet", "t5", "mt5", "bart", "pegasus",
                 "blenderbot", "led", "longformer", "modernbert", "xlm", "prophetnet", "mbart", "squeezebert",
                 "convbert", "byt5")
# Families whose tokenizer is transformers' Python one (no tokenizer.json): XLM's needs sacremoses.
PYTHON_TOKENIZER_FAMILIES = ("xlm", "prophetnet", "byt5")
ALL_FAMILIES = FAMILIES + MORE_FAMILIES

# Longest input in tokens, special tokens included (the tokenizer's model_max_length). Small so
# truncation tests stay cheap.
MAX_LENGTH = 128
NUM_LAYERS = 4
HIDDEN = 32
HEADS = 2
INTERMEDIATE = 64
VOCAB_SIZE = 1000  # WordPiece and byte-level BPE
UNIGRAM_SIZE = 800  # SentencePiece-style pieces, specials excluded
SEED = 1234
# bert-score 0.3.13 cuts SqueezeBERT at `encoder.layer`, which it does not have (its list is
# `encoder.layers`): the reference runs it with all_layers only, whose row N is layer N there.
CUT_ONLY_BY_RAPIDSCORE = frozenset({"squeezebert"})
# ConvBERT's convolution reads the padding beside a sentence, so bert-score's scores move with its
# batch composition; rapidscore runs such sentences unpadded: bert-score's batch_size=1 numbers.
PADDING_SENSITIVE = frozenset({"convbert"})


def check_family(family: str) -> None:
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of {ALL_FAMILIES}")


def build_config(family: str, tokenizer) -> PretrainedConfig:
    """Tiny transformers config of ``family`` sized to ``tokenizer``."""
    check_family(family)
    import transformers

    vocab_size = len(tokenizer)
    pad_id = tokenizer.pad_token_id
    common = dict(vocab_size=vocab_size, pad_token_id=pad_id, initializer_range=0.02)
    if family == "distilbert":
        return transformers.DistilBertConfig(
            dim=HIDDEN, n_layers=NUM_LAYERS, n_heads=HEADS, hidden_dim=INTERMEDIATE,
            max_position_embeddings=MAX_LENGTH, sinusoidal_pos_embds=False, **common)
    if family in MORE_FAMILIES:
        return _more_config(family, tokenizer, common)
    layers = dict(hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                  intermediate_size=INTERMEDIATE, **common)
    if family == "bert":
        return transformers.BertConfig(max_position_embeddings=MAX_LENGTH, **layers)
    if family == "electra":
        # embedding_size < hidden_size exercises ELECTRA's embedding projection.
        return transformers.ElectraConfig(max_position_embeddings=MAX_LENGTH, embedding_size=16, **layers)
    if family in ("roberta", "xlm-roberta"):
        # RoBERTa positions start after the padding index: max_len + pad_id + 1 = max_len + 2.
        config_class = (transformers.RobertaConfig if family == "roberta"
                        else transformers.XLMRobertaConfig)
        return config_class(max_position_embeddings=MAX_LENGTH + 2, type_vocab_size=1,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            **layers)
    # deberta-v2, DeBERTa-v3 style: relative attention, no absolute position input.
    # position_buckets, norm_rel_ebd, share_att_key: stored by the config (as extra attributes) and
    # read by the model, though transformers 5 leaves them out of the typed signature.
    return transformers.DebertaV2Config(  # type: ignore[call-arg]
        max_position_embeddings=MAX_LENGTH, type_vocab_size=0, relative_attention=True,
        position_buckets=32, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
        position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, **layers)


def _more_config(family: str, tokenizer, common: dict) -> PretrainedConfig:
    """Tiny configs of MORE_FAMILIES: each family's own layout (an encoder-decoder keeps a tiny
    decoder too, as bert-score loads the whole model and keeps its encoder)."""
    import transformers

    specials = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    layers = dict(hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                  intermediate_size=INTERMEDIATE, **common)
    if family == "deberta":  # DeBERTa v1: relative attention over absolute positions
        return transformers.DebertaConfig(max_position_embeddings=MAX_LENGTH, type_vocab_size=0,
                                          relative_attention=True, pos_att_type=["p2c", "c2p"],
                                          max_relative_positions=-1, **layers)
    if family == "mpnet":  # positions start after the padding index, as RoBERTa's
        return transformers.MPNetConfig(max_position_embeddings=MAX_LENGTH + 2,
                                        **specials, **layers)
    if family == "big_bird":
        # Full attention: block-sparse attention only starts beyond (5 + 2 * random blocks) blocks.
        return transformers.BigBirdConfig(max_position_embeddings=MAX_LENGTH, attention_type="original_full",
                                          **layers)
    if family == "albert":  # factorised embeddings (16 -> 32) and 2 layer groups shared over 4 layers
        return transformers.AlbertConfig(embedding_size=16, num_hidden_groups=2, max_position_embeddings=MAX_LENGTH,
                                         **specials, **layers)
    if family == "xlnet":  # relative positions, no position limit
        return transformers.XLNetConfig(d_model=HIDDEN, n_layer=NUM_LAYERS, n_head=HEADS, d_inner=INTERMEDIATE,
                                        **specials, **common)
    if family in ("t5", "mt5", "byt5"):  # relative position buckets; the encoder ends with a final RMS norm
        config_class = transformers.MT5Config if family == "mt5" else transformers.T5Config
        # decoder_start_token_id: stored by the config, though not in its typed signature
        return config_class(  # type: ignore[call-arg]
                            d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=INTERMEDIATE, num_layers=NUM_LAYERS,
                            num_decoder_layers=1, num_heads=HEADS, relative_attention_num_buckets=8,
                            relative_attention_max_distance=32, decoder_start_token_id=tokenizer.pad_token_id,
                            eos_token_id=tokenizer.eos_token_id, feed_forward_proj="gated-gelu" if family == "mt5"
                            else "relu", **common)
    seq2seq = dict(d_model=HIDDEN, encoder_layers=NUM_LAYERS, decoder_layers=1, encoder_attention_heads=HEADS,
                   decoder_attention_heads=HEADS, encoder_ffn_dim=INTERMEDIATE, decoder_ffn_dim=INTERMEDIATE,
                   decoder_start_token_id=tokenizer.eos_token_id, **specials, **common)
    if family == "bart":  # learned positions offset by 2, a layer norm on the embeddings
        return transformers.BartConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "mbart":  # pre-norm layers, a layer norm on the embeddings and a final one
        return transformers.MBartConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "pegasus":  # sinusoidal positions, pre-norm layers, a final layer norm
        return transformers.PegasusConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "blenderbot":  # pre-norm layers with a final layer norm
        return transformers.BlenderbotConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "led":  # Longformer's local + global attention in a BART layout
        return transformers.LEDConfig(max_encoder_position_embeddings=MAX_LENGTH, max_decoder_position_embeddings=32,
                                      attention_window=[16] * NUM_LAYERS, **seq2seq)
    if family == "longformer":  # sliding-window attention (window 16: texts longer than 8 tokens use it)
        return transformers.LongformerConfig(max_position_embeddings=MAX_LENGTH + 2, attention_window=16,
                                             type_vocab_size=1, **specials, **layers)
    if family == "squeezebert":  # grouped 1x1 convolutions in place of linear layers
        return transformers.SqueezeBertConfig(embedding_size=HIDDEN, max_position_embeddings=MAX_LENGTH,
                                              q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
                                              intermediate_groups=2, output_groups=2, **layers)
    if family == "convbert":  # span-based dynamic convolution heads beside self-attention
        return transformers.ConvBertConfig(embedding_size=16, max_position_embeddings=MAX_LENGTH, head_ratio=2,
                                           conv_kernel_size=3, **layers)
    if family == "xlm":  # four parallel per-layer lists, run by a layer count (n_layers)
        # the *_index ids: stored by the config, though not in its typed signature
        return transformers.XLMConfig(  # type: ignore[call-arg]
                                      emb_dim=HIDDEN, n_layers=NUM_LAYERS, n_heads=HEADS, n_langs=1,
                                      max_position_embeddings=MAX_LENGTH, use_lang_emb=False,
                                      pad_index=tokenizer.pad_token_id,
                                      unk_index=tokenizer.unk_token_id, bos_index=tokenizer.bos_token_id,
                                      eos_index=tokenizer.sep_token_id, **common)
    if family == "prophetnet":  # relative position buckets in the decoder; an n-gram decoder
        return transformers.ProphetNetConfig(hidden_size=HIDDEN, encoder_ffn_dim=INTERMEDIATE,
                                             num_encoder_layers=NUM_LAYERS, num_encoder_attention_heads=HEADS,
                                             decoder_ffn_dim=INTERMEDIATE,
                                             num_decoder_layers=1, num_decoder_attention_heads=HEADS,
                                             max_position_embeddings=MAX_LENGTH, ngram=2, num_buckets=8,
                                             relative_max_distance=32, decoder_start_token_id=tokenizer.sep_token_id,
                                             **common)
    # modernbert: rotary positions, alternating global / local (sliding-window) attention, a final norm
    # global_attn_every_n_layers: stored by the config, though not in its typed signature
    return transformers.ModernBertConfig(  # type: ignore[call-arg]
                                         hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                                         intermediate_size=INTERMEDIATE, max_position_embeddings=MAX_LENGTH,
                                         global_attn_every_n_layers=2, local_attention=16,
                                         cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                                         **specials, **common)

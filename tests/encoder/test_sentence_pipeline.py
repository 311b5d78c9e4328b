"""Sentence vectors follow the model's own sentence-transformers pipeline (issue 25, item 3).

The slow tests compare ``Encoder(dir).sentence_embeddings`` (ONNX Runtime's numpy path and the
torch path) with ``SentenceTransformer(dir).encode`` on tiny models saved with each module
configuration (``rapidscore.testing.tiny_sentence_models``). The fast ones check the reading of
model directories written by hand, the refusals, and the numpy and torch kernels against each other.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from rapidscore.encoder import Encoder
from rapidscore.encoder.sentence_pipeline import (
    POOLING_MODES,
    Dense,
    Normalize,
    Pooling,
    SentencePipeline,
    load_pipeline,
    lowercase_tokenizer_json,
    prompt_token_count,
    read_safetensors,
)

TEXTS = [
    "The cat sat on the mat.",
    "THE CAT SAT ON THE MAT.",
    "A considerably longer sentence, with commas, numbers like 3.14 and words such as naïve café, going on "
    "and on past sixteen tokens for sure.",
    "東京 is a city; 😀 emoji too.",
    "x",
    "",
    "The cat sat on the mat.",
    "Machine translation quality is often measured with automatic metrics.",
]
TOLERANCE = 1e-5  # the bound, on vectors and on cosine similarities
BACKENDS = ("onnx", "torch")

# Each configuration's pipeline as rapidscore names it (the NRR signature drops a final "+norm").
EXPECTED_NAMES = {
    "mean_norm": "mean+norm", "mean": "mean", "short": "mean+norm", "legacy_max_length": "mean+norm",
    "cls_norm": "cls+norm", "max": "max", "mean_sqrt": "mean_sqrt_len_tokens", "weightedmean": "weightedmean+norm",
    "lasttoken": "lasttoken+norm", "labse": "cls+dense+norm", "two_dense": "mean+dense+dense+norm",
    "concat": "cls,max,mean+norm", "concat_legacy": "cls,max,mean_sqrt_len_tokens", "lower": "mean+norm",
    "prompts": "mean+norm", "prompts_excluded": "mean-noprompt+norm",
    "prompts_excluded_all": "cls,max,mean,mean_sqrt_len_tokens,weightedmean,lasttoken-noprompt",
}
# The calls compared with sentence-transformers per configuration (prompt options of encode).
PROMPT_CALLS = [{}, {"prompt_name": "query"}, {"prompt_name": "passage"}, {"prompt": "Represent this: "},
                {"prompt": ""}]
CALLS = {name: PROMPT_CALLS if name.startswith("prompts") else [{}] for name in EXPECTED_NAMES}
# The configurations rapidscore gave the same vectors for before it followed the pipeline.
SAME_AS_BEFORE = {"mean_norm", "short"}


def cosines(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    return unit @ unit.T


def max_differences(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max abs vector difference, max abs cosine-similarity difference)."""
    assert got.shape == want.shape and got.dtype == np.float32
    return (float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()),
            float(np.abs(cosines(got) - cosines(want)).max()))


# ------------------------------------------------------------------------------------------------
# against sentence-transformers (slow: it runs the reference package)
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sentence_model(tiny_models_root):
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is the reference (test extra)")
    from rapidscore.testing.tiny_sentence_models import tiny_sentence_model_dir

    def build(name: str) -> Path:
        return tiny_sentence_model_dir(name, tiny_models_root)

    return build


@pytest.fixture(scope="module")
def reference(sentence_model):
    """name -> the loaded SentenceTransformer (once per configuration)."""
    from sentence_transformers import SentenceTransformer

    models: dict = {}

    def get(name: str):
        if name not in models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                models[name] = SentenceTransformer(str(sentence_model(name)), device="cpu")
        return models[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(EXPECTED_NAMES))
@pytest.mark.filterwarnings("ignore::rapidscore.TruncationWarning")  # short, legacy_max_length: expected
def test_sentence_vectors_equal_sentence_transformers(sentence_model, reference, name, backend):
    encoder = Encoder(str(sentence_model(name)), backend=backend)
    assert encoder.sentence_pipeline.name == EXPECTED_NAMES[name]
    for call in CALLS[name]:
        want = reference(name).encode(TEXTS, **call)
        got = encoder.sentence_embeddings(TEXTS, **call)
        vectors, cosine = max_differences(got, want)
        assert vectors <= TOLERANCE and cosine <= TOLERANCE, (name, backend, call, vectors, cosine)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in EXPECTED_NAMES if n not in SAME_AS_BEFORE])
def test_each_configuration_changes_the_vectors(sentence_model, reference, name):
    """The comparison above can fail: what rapidscore computed before (mean pooling and unit
    length of the encoder's own tokens, no prompt) is far from the model's vectors here."""
    encoder = Encoder(str(sentence_model(name)))
    before = encoder.pool(encoder.encode(TEXTS), "mean", True)
    call = CALLS[name][1] if name.startswith("prompts_excluded") else {}  # no default prompt there
    want = reference(name).encode(TEXTS, **call)
    assert before.shape != want.shape or max(max_differences(before, want)) > 1e-3  # a Dense changes the size


@pytest.mark.slow
def test_prompts_exclusion_and_default(sentence_model, reference):
    # The default prompt applies when none is given, as in encode; prompt="" turns it off.
    prompts = Encoder(str(sentence_model("prompts")))
    np.testing.assert_array_equal(prompts.sentence_embeddings(TEXTS), prompts.sentence_embeddings(TEXTS,
                                                                                                  prompt="query: "))
    assert not np.allclose(prompts.sentence_embeddings(TEXTS), prompts.sentence_embeddings(TEXTS, prompt=""))
    # include_prompt=False: the prompt's own tokens take no part in pooling, yet change the others'.
    excluded = Encoder(str(sentence_model("prompts_excluded")))
    inputs, length = excluded.sentence_inputs(["a b"], prompt_name="query")
    assert inputs == ["query: a b"]
    assert length == len(excluded.tokenize(["query: "])[0]) - 1  # [CLS] and the prompt's tokens, not [SEP]
    assert not np.allclose(excluded.sentence_embeddings(TEXTS), excluded.sentence_embeddings(TEXTS,
                                                                                              prompt_name="query"))
    with pytest.raises(ValueError, match=r"prompt_name 'nope' is not one of the model's prompts"):
        excluded.sentence_embeddings(TEXTS, prompt_name="nope")
    with pytest.raises(ValueError, match="not both"):
        excluded.sentence_embeddings(TEXTS, prompt="a", prompt_name="query")


@pytest.mark.slow
def test_do_lower_case_and_max_seq_length(sentence_model):
    lower = Encoder(str(sentence_model("lower")))
    upper_and_lower = lower.sentence_embeddings([TEXTS[0], TEXTS[1]])
    np.testing.assert_array_equal(upper_and_lower[0], upper_and_lower[1])
    # the tokenizer itself is cased: without do_lower_case the two differ
    assert not np.array_equal(*lower.tokenize([TEXTS[0], TEXTS[1]]))
    # max_seq_length: as saved by sentence-transformers 6 (the tokenizer) and by older versions
    # (sentence_bert_config.json, where the tokenizer says 128); an explicit max_length wins.
    assert Encoder(str(sentence_model("short"))).sentence_max_length == 16
    legacy = Encoder(str(sentence_model("legacy_max_length")))
    assert (legacy.sentence_max_length, legacy.max_length) == (12, 128)
    assert Encoder(str(sentence_model("legacy_max_length")), max_length=20).sentence_max_length == 20


@pytest.mark.slow
def test_unknown_module_is_refused(sentence_model):
    model_dir = sentence_model("unknown")
    pattern = r"modules\.json: module 2 has type '[\w.]*LayerNorm', which rapidscore does not implement"
    encoder = Encoder(str(model_dir))  # token embeddings (BERTScore) still work
    assert encoder.tokenize(["a"])
    with pytest.raises(ValueError, match=pattern):
        encoder.sentence_embeddings(["a"])
    from rapidscore.nrr import SentenceSimilarity

    with pytest.raises(ValueError, match=pattern):
        SentenceSimilarity(str(model_dir))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_nrr_follows_the_pipeline(sentence_model, reference, backend):
    from rapidscore.nrr import SentenceSimilarity, negative_rejection

    generated = ["The cat sat on the mat.", "Paris is in France.", "x", "THE CAT SAT."]
    references = ["A cat was sitting on a mat.", ["Berlin is in Germany.", "Paris is a French city."], "y",
                  "the cat sat."]
    for name, prompt_name, pooling in (("labse", None, "pooling:cls+dense|"),
                                       ("prompts_excluded", "query", "pooling:mean-noprompt|prompt:query|")):
        model = SentenceSimilarity(str(sentence_model(name)), backend=backend, prompt_name=prompt_name)
        result = negative_rejection(generated, references, threshold=0.5, similarity_model=model)
        assert pooling in result.signature
        st = reference(name)
        call = {} if prompt_name is None else {"prompt_name": prompt_name}
        flat = [r for refs in references for r in ([refs] if isinstance(refs, str) else refs)]
        owners = [0, 1, 1, 2, 3]
        want = np.einsum("ij,ij->i", st.encode([generated[o] for o in owners], normalize_embeddings=True, **call),
                         st.encode(flat, normalize_embeddings=True, **call)).astype(np.float64)
        best = np.array([want[0], max(want[1], want[2]), want[3], want[4]])
        assert np.abs(result.similarities - best).max() <= TOLERANCE, (name, backend)


# ------------------------------------------------------------------------------------------------
# model directories written by hand (fast)
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def bert_copy(tiny_model_path, tmp_path):
    """A copy of the tiny BERT (no modules.json) to write sentence-transformers files into."""
    target = tmp_path / "model"
    shutil.copytree(tiny_model_path("bert"), target)
    return target


def write_modules(model_dir: Path, *modules: tuple[str, str, dict | None], **files) -> Path:
    """modules.json with (type, path, config) after a Transformer at the root; ``files``: more
    JSON files (``sentence_bert_config``, ``config_sentence_transformers``)."""
    entries = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    for index, (kind, path, config) in enumerate(modules, start=1):
        entries.append({"idx": index, "name": str(index), "path": path, "type": kind})
        if config is not None:
            (model_dir / path).mkdir(parents=True, exist_ok=True)
            (model_dir / path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (model_dir / "modules.json").write_text(json.dumps(entries), encoding="utf-8")
    for name, content in files.items():
        (model_dir / f"{name}.json").write_text(json.dumps(content), encoding="utf-8")
    return model_dir


POOLING = "sentence_transformers.models.Pooling"
DENSE = "sentence_transformers.models.Dense"
NORMALIZE = "sentence_transformers.models.Normalize"


def test_a_directory_without_modules_json_keeps_mean_and_unit_length(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")))
    assert encoder.sentence_pipeline.name == "mean+norm" and encoder.sentence_pipeline.source is None
    tokens = encoder.token_embeddings(TEXTS)
    means = np.stack([t.mean(axis=0) for t in tokens])
    want = means / np.linalg.norm(means, axis=1, keepdims=True)
    np.testing.assert_allclose(encoder.sentence_embeddings(TEXTS), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("weights_file", ["model.safetensors", "pytorch_model.bin"])
def test_cls_dense_normalize_written_by_hand(bert_copy, weights_file):
    """LaBSE's layout, computed independently from the token vectors in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(8, 32)).astype(np.float32) / 4
    bias = rng.normal(size=8).astype(np.float32)
    write_modules(bert_copy, (POOLING, "1_Pooling", {"word_embedding_dimension": 32, "pooling_mode_cls_token": True,
                                                      "pooling_mode_mean_tokens": False}),
                  (DENSE, "2_Dense", {"in_features": 32, "out_features": 8, "bias": True,
                                      "activation_function": "torch.nn.modules.activation.Tanh"}),
                  (NORMALIZE, "3_Normalize", None))
    state = {"linear.weight": torch.from_numpy(weight), "linear.bias": torch.from_numpy(bias)}
    if weights_file == "model.safetensors":
        from safetensors.torch import save_file

        save_file(state, str(bert_copy / "2_Dense" / weights_file))
    else:
        torch.save(state, bert_copy / "2_Dense" / weights_file)
    for backend in BACKENDS:
        encoder = Encoder(str(bert_copy), backend=backend)
        cls = np.stack([t[0] for t in encoder.token_embeddings(TEXTS)]).astype(np.float64)
        dense = np.tanh(cls @ weight.T.astype(np.float64) + bias)
        want = dense / np.linalg.norm(dense, axis=1, keepdims=True)
        got = encoder.sentence_embeddings(TEXTS)
        assert got.shape == (len(TEXTS), 8)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        # a caller's pooling replaces the model's pooling and Dense layers (what rapidscore did)
        np.testing.assert_allclose(encoder.sentence_embeddings(TEXTS, pooling="cls", normalize=False),
                                   cls, rtol=0, atol=1e-5)


def refusal(model_dir: Path) -> str:
    with pytest.raises(ValueError) as error:
        Encoder(str(model_dir)).sentence_embeddings(["a"])
    return str(error.value)


def test_refusals_name_the_value_and_the_file(bert_copy):
    mean = {"embedding_dimension": 32, "pooling_mode": "mean"}
    write_modules(bert_copy, (POOLING, "1_Pooling", mean), ("sentence_transformers.models.WordWeights", "2_W", {}))
    message = refusal(bert_copy)
    assert "'sentence_transformers.models.WordWeights'" in message and str(bert_copy / "modules.json") in message
    write_modules(bert_copy, ("my_package.Pooling", "1_Pooling", mean))  # not sentence-transformers' own class
    assert "'my_package.Pooling'" in refusal(bert_copy)
    write_modules(bert_copy, (NORMALIZE, "1_Normalize", None))
    assert "expected one Pooling module right after the Transformer" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", {"embedding_dimension": 32, "pooling_mode": "median"}))
    assert "pooling mode 'median'" in refusal(bert_copy) and "1_Pooling" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", {"embedding_dimension": 64, "pooling_mode": "mean"}))
    assert "expects token vectors of 64, the model gives 32" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean),
                  (DENSE, "2_Dense", {"in_features": 32, "out_features": 8,
                                      "activation_function": "torch.nn.Softsign"}))
    assert "activation_function 'torch.nn.Softsign' is not implemented" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean),
                  (DENSE, "2_Dense", {"in_features": 32, "out_features": 8}))
    assert "has no model.safetensors or pytorch_model.bin" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean), (NORMALIZE, "2_Normalize",
                                                             {"module_input_name": "token_embeddings"}))
    assert "module_input_name is 'token_embeddings'" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean), sentence_bert_config={"transformer_task": "text-generation"})
    assert "transformer_task is 'text-generation'" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean), sentence_bert_config={},
                  config_sentence_transformers={"model_type": "SparseEncoder"})
    assert "model_type is 'SparseEncoder'" in refusal(bert_copy)
    write_modules(bert_copy, (POOLING, "1_Pooling", mean),
                  config_sentence_transformers={"prompts": {"q": "q: "}, "default_prompt_name": "query2"})
    assert "default_prompt_name 'query2'" in refusal(bert_copy)


def test_settings_are_read(bert_copy):
    write_modules(bert_copy, (POOLING, "1_Pooling", {"word_embedding_dimension": 32, "pooling_mode_max_tokens": True,
                                                      "pooling_mode_lasttoken": True, "include_prompt": False}),
                  sentence_bert_config={"max_seq_length": 9, "do_lower_case": True},
                  config_sentence_transformers={"prompts": {"query": "q: ", "doc": None}, "default_prompt_name": "doc",
                                                "similarity_fn_name": "dot"})
    pipeline = load_pipeline(bert_copy)
    assert pipeline.pooling == Pooling(modes=("max", "lasttoken"), include_prompt=False, dimension=32)
    assert (pipeline.max_seq_length, pipeline.do_lower_case, pipeline.similarity_fn_name) == (9, True, "dot")
    assert dict(pipeline.prompts) == {"query": "q: ", "document": "", "doc": ""}
    assert pipeline.resolve_prompt() == "" and pipeline.resolve_prompt(prompt_name="query") == "q: "
    assert (pipeline.name, pipeline.cosine_name, pipeline.normalizes) == ("max,lasttoken-noprompt",) * 2 + (False,)
    encoder = Encoder(str(bert_copy))
    assert encoder.sentence_max_length == 9
    from rapidscore.nrr import SentenceSimilarity

    with pytest.warns(UserWarning, match="similarity_fn_name='dot'"):  # dot of vectors not normalised
        SentenceSimilarity(str(bert_copy))


def test_lowercase_tokenizer_json_puts_lowercase_first():
    from tokenizers import Tokenizer, models, normalizers

    tokenizer = Tokenizer(models.WordLevel({"a": 0}, unk_token="a"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
    text = lowercase_tokenizer_json(tokenizer.to_str())
    normalizer = json.loads(text)["normalizer"]
    assert [n["type"] for n in normalizer["normalizers"]] == ["Lowercase", "BertNormalizer"]
    assert Tokenizer.from_str(text).normalizer.normalize_str("ÉCOLE \u03a3") == "école \u03c3"  # sigma
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    already = tokenizer.to_str()
    assert lowercase_tokenizer_json(already) == already  # lowercases already: left as it is


def test_prompt_length_drops_one_trailing_special_token():
    assert prompt_token_count(np.array([101, 7, 8, 102]), (101, 102)) == 3
    assert prompt_token_count([7, 8], (101, 102)) == 2
    assert prompt_token_count([], (0,)) == 0


def test_read_safetensors_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    tensors = {"f32": torch.randn(3, 4), "f16": torch.randn(5).half(), "bf16": torch.randn(2, 2).bfloat16(),
               "f64": torch.randn(2).double()}
    save_file(tensors, str(tmp_path / "w.safetensors"))
    got = read_safetensors(tmp_path / "w.safetensors")
    for name, tensor in tensors.items():
        assert got[name].dtype == np.float32
        np.testing.assert_array_equal(got[name], tensor.float().numpy())


def test_import_does_not_load_torch():
    code = ("import sys, rapidscore, rapidscore.encoder.sentence_pipeline; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def random_pipeline(rng, modes, include_prompt: bool) -> SentencePipeline:
    """Pooling, then a Dense per activation (with and without bias, residual as the input itself
    and as a projection), then Normalize."""

    def dense(size_in: int, size_out: int, activation: str, bias: bool = True, residual: str = "") -> Dense:
        return Dense(weight=rng.normal(size=(size_out, size_in)).astype(np.float32),
                     bias=rng.normal(size=size_out).astype(np.float32) if bias else None, activation=activation,
                     use_residual=bool(residual),
                     residual=rng.normal(size=(size_out, size_in)).astype(np.float32) if residual == "projected"
                     else None)

    pooled = 6 * len(modes)
    steps = (dense(pooled, 5, "gelu"), dense(5, 5, "sigmoid", residual="input"),
             dense(5, 4, "relu", residual="projected"), dense(4, 7, "identity", bias=False), dense(7, 3, "tanh"),
             Normalize())
    return SentencePipeline(pooling=Pooling(modes=tuple(modes), include_prompt=include_prompt), steps=steps)


@pytest.mark.parametrize("include_prompt", [True, False])
@pytest.mark.parametrize("modes", [[m] for m in POOLING_MODES] + [list(POOLING_MODES)])
def test_numpy_and_torch_paths_agree(modes, include_prompt):
    """The flat numpy kernels (ONNX Runtime's path) and the padded torch ones (the device path)
    on the same token vectors: every mode, prompts longer than some sentences, empty sentences."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(len(modes) * 2 + include_prompt)
    pipeline = random_pipeline(rng, modes, include_prompt)
    lengths = np.array([5, 1, 0, 3, 12, 2, 7, 4], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    flat = rng.normal(size=(int(offsets[-1]), 6)).astype(np.float32)
    padded = np.zeros((len(lengths), int(lengths.max()), 6), dtype=np.float32)
    mask = np.zeros(padded.shape[:2], dtype=np.int64)
    for k, n in enumerate(lengths):
        padded[k, :n], mask[k, :n] = flat[offsets[k]:offsets[k + 1]], 1
    for prompt_length in (0, 2, 4):
        host = pipeline.apply_flat(flat, offsets, prompt_length)
        device = pipeline.apply_padded(torch.from_numpy(padded), mask, prompt_length, torch.from_numpy).numpy()
        np.testing.assert_allclose(host, device, rtol=0, atol=1e-5)
        assert not host[2].any()  # no token at all: a zero vector
        assert np.isfinite(host).all()  # sentences whose every token is the prompt too

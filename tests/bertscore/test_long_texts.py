"""Texts longer than the model's maximum length: ``long_texts="window"`` (issue 25, item 6).

The brute-force reference below defines the windows: it tokenises each text whole, finds the
windows with a plain loop, runs the encoder on each window alone, takes every token from the
window where it sits furthest from a cut (ties: the earlier window), and scores with a plain
numpy greedy matching in float64. Tolerances, stated once:

- within the maximum length: "window" equals "truncate" bit for bit (the same code runs);
- against the brute-force reference: max |dP|, |dR|, |dF| <= 1e-6 (float32 dot products in the
  C++ kernel against float64 here: measured 4e-8 to 1e-7 on the six tiny families; batches of
  windows against windows run alone: bit-identical on the 2-core CPU, about 1e-7 allowed);
- different routes to the same windows (streaming, all layers, the service): <= 1e-6 (streaming
  measured 0.0);
- torch against ONNX Runtime (two graphs of the same weights): <= 1e-5, the parity suite's bound.

tiny_models.MAX_LENGTH is 128, so windows are cheap here; one MiniLM check (512) is marked slow.
"""

from __future__ import annotations

import json
import math
import tracemalloc
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import Encoder
from rapidscore.encoder.runtime import RunnerBase
from rapidscore.encoder.tokens.windows import choose_windows, count_windows, split_windows
from rapidscore.errors import TruncationWarning
from rapidscore.testing.tiny_models import FAMILIES, MAX_LENGTH

REFERENCE_ATOL = 1e-6
ROUTE_ATOL = 1e-6
BACKENDS_ATOL = 1e-5

WORDS = ("the cat sat on a mat while dogs ran across green fields under bright sky and people talked "
         "about music books quarterly earnings penguins violin volcanic ash rivers hills stars").split()


def sentence(rng, n_words: int) -> str:
    return " ".join(rng.choice(WORDS, size=n_words))


def corpus(seed: int = 0) -> tuple[list[str], list[list[str]]]:
    """Candidates with one to three references; texts from 3 words to several windows long,
    repeated texts, and an empty reference."""
    rng = np.random.default_rng(seed)
    sizes = [3, 60, 150, 400, 12, 250, 90, 700]
    cands = [sentence(rng, n) for n in sizes]
    refs = [[sentence(rng, int(rng.integers(5, 500))) for _ in range(1 + k % 3)] for k in range(len(sizes))]
    refs[1].append(cands[3])  # a long text shared by a candidate and a reference
    refs[4] = [""]
    return cands, refs


# -- the brute-force reference ------------------------------------------------------------------


def raw_tokenizer(model_dir):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def frame_lengths(tokenizer, text: str) -> tuple[int, int]:
    """Special tokens before and after the text's own tokens, read off this text."""
    full = tokenizer.encode(text).ids
    plain = tokenizer.encode(text, add_special_tokens=False).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return start, len(full) - start - len(plain)
    raise AssertionError("no framing")


def reference_windows(n: int, content: int) -> list[int]:
    """Window starts, by a plain loop: every stride tokens while the window ends before the text
    does, then one window ending at the text's end."""
    stride = max(1, content // 2)
    starts, start = [], 0
    while start + content < n:
        starts.append(start)
        start += stride
    starts.append(n - content)
    return starts


def reference_choice(p: int, starts: list[int], content: int) -> int:
    """The window token p takes: furthest from a cut (the text's own ends cut nothing); ties to
    the earlier window."""
    best, best_distance = -1, -1.0
    for k, start in enumerate(starts):
        if start <= p < start + content:
            left = p - start if k > 0 else math.inf
            right = start + content - 1 - p if k < len(starts) - 1 else math.inf
            if min(left, right) > best_distance:
                best, best_distance = k, min(left, right)
    return best


def reference_embeddings(encoder: Encoder, tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Ids and embeddings of a whole text, each window run through the encoder alone."""
    ids = np.asarray(tokenizer.encode(text).ids, dtype=np.int64)
    width = encoder.max_length
    if len(ids) <= width:
        return ids, encoder.embed_ids([ids]).embeddings
    n_prefix, n_suffix = frame_lengths(tokenizer, text)
    body = ids[n_prefix:len(ids) - n_suffix]
    content = width - n_prefix - n_suffix
    starts = reference_windows(len(body), content)
    runs = [encoder.embed_ids([np.concatenate([ids[:n_prefix], body[s:s + content], ids[len(ids) - n_suffix:]])])
            .embeddings for s in starts]
    out = np.zeros(runs[0].shape[:-2] + (len(ids), runs[0].shape[-1]), dtype=np.float32)
    out[..., :n_prefix, :] = runs[0][..., :n_prefix, :]
    out[..., len(ids) - n_suffix:, :] = runs[-1][..., width - n_suffix:, :]
    for p in range(len(body)):
        k = reference_choice(p, starts, content)
        out[..., n_prefix + p, :] = runs[k][..., n_prefix + p - starts[k], :]
    return ids, out


def reference_scores(encoder: Encoder, model_dir, cands, refs, *, idf: bool = False) -> np.ndarray:
    """(3, N) best P, R, F per candidate, plain numpy in float64."""
    tokenizer = raw_tokenizer(model_dir)
    texts = {t.strip() for t in cands} | {r.strip() for group in refs for r in group}
    encoded = {t: reference_embeddings(encoder, tokenizer, t) for t in texts}
    specials = {encoder.spec.cls_id, encoder.spec.sep_id} - {None}
    special_set = set(encoder.spec.special_ids)
    documents = [set(encoded[r.strip()][0].tolist()) for group in refs for r in group]

    def weights(ids):
        if not idf:
            return np.array([0.0 if i in specials else 1.0 for i in ids.tolist()])
        return np.array([math.log((len(documents) + 1) / (sum(i in d for d in documents) + 1))
                         for i in ids.tolist()])

    def pair(c: str, r: str) -> np.ndarray:
        (c_ids, c_emb), (r_ids, r_emb) = encoded[c.strip()], encoded[r.strip()]
        if all(i in special_set for i in c_ids.tolist()) or all(i in special_set for i in r_ids.tolist()):
            return np.zeros(3)
        a = c_emb.astype(np.float64)
        b = r_emb.astype(np.float64)
        a /= np.linalg.norm(a, axis=-1, keepdims=True)
        b /= np.linalg.norm(b, axis=-1, keepdims=True)
        sim = a @ b.T
        wc, wr = weights(c_ids), weights(r_ids)
        p = (sim.max(axis=1) * wc).sum() / wc.sum()
        r_ = (sim.max(axis=0) * wr).sum() / wr.sum()
        return np.array([p, r_, 2 * p * r_ / (p + r_)])

    return np.stack([np.max([pair(c, r) for r in group], axis=0) for c, group in zip(cands, refs)], axis=1)


def assert_close(result, want: np.ndarray, atol: float) -> None:
    got = np.stack([result.precision, result.recall, result.f1])
    assert np.abs(got - want).max() <= atol, np.abs(got - want).max()


def assert_identical(a, b) -> None:
    for name in ("precision", "recall", "f1"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name


def single_token_words(tokenizer) -> list[str]:
    """Words that are one token wherever they stand (so n of them make n content tokens)."""
    return [w for w in WORDS if len(tokenizer.encode(f"{w} {w} {w}", add_special_tokens=False).ids) == 3]


def text_of(tokenizer, n_content: int) -> str:
    words = single_token_words(tokenizer)
    text = " ".join(words[k % len(words)] for k in range(n_content))
    assert len(tokenizer.encode(text, add_special_tokens=False).ids) == n_content
    return text


# -- the window arithmetic ----------------------------------------------------------------------


@pytest.mark.parametrize("content", [1, 2, 3, 7, 10, 126])
def test_windows_match_the_plain_loop(content):
    for n in [*range(1, 3 * content + 4), 10 * content + 1]:
        starts, best = choose_windows(n, content)
        if n <= content:
            assert starts.tolist() == [0] and (best == 0).all()
            continue
        assert starts.tolist() == reference_windows(n, content)
        assert best.tolist() == [reference_choice(p, starts.tolist(), content) for p in range(n)]
        assert count_windows(np.array([n + 2]), content + 2, 2).tolist() == [len(starts)]
    assert count_windows(np.array([0, 2, content + 2]), content + 2, 2).tolist() == [1, 1, 1]


def test_split_windows_frames_each_window_and_covers_every_row_once():
    prefix, suffix = np.array([101]), np.array([102])
    text = np.concatenate([prefix, np.arange(1000, 1300), suffix])  # 300 content tokens
    short = np.array([101, 5, 6, 102])
    offsets = np.array([0, len(short), len(short) + len(text)])
    plan = split_windows([short, text], offsets, 128, prefix, suffix)
    assert (plan.windowed, plan.windows) == (1, len(reference_windows(300, 126)))
    assert plan.inputs[0] is short and plan.destinations[0].tolist() == [0, 1, 2, 3]
    for window in plan.inputs[1:]:
        assert len(window) == 128 and window[0] == 101 and window[-1] == 102
    rows = np.concatenate(plan.destinations)
    rows = rows[rows >= 0]
    assert sorted(rows.tolist()) == list(range(offsets[-1]))  # every row filled exactly once
    flat_inputs = np.concatenate(plan.inputs)
    flat_dest = np.concatenate(plan.destinations)
    filled = np.empty(offsets[-1], dtype=np.int64)
    filled[flat_dest[flat_dest >= 0]] = flat_inputs[flat_dest >= 0]
    assert filled.tolist() == short.tolist() + text.tolist()  # each row gets its own token
    with pytest.raises(ValueError, match="do not start with"):
        split_windows([text[1:]], np.array([0, len(text) - 1]), 128, prefix, suffix)


# -- settings -----------------------------------------------------------------------------------


def test_bad_values_are_named(tiny_model_path):
    from rapidscore.serve.config import ServeConfig

    model = tiny_model_path("bert")
    for make in (lambda: BERTScore(model, long_texts="windows"), lambda: Encoder(model, long_texts="windows"),
                 lambda: ServeConfig(long_texts="windows")):
        with pytest.raises(ValueError, match=r"long_texts must be one of \('truncate', 'window'\), got 'windows'"):
            make()
    with pytest.raises(ValueError, match="given encoder has long_texts='truncate'"):
        BERTScore(encoder=Encoder(model), long_texts="window")
    with pytest.raises(ValueError, match="needs room for text"):
        Encoder(model, long_texts="window", max_length=2)
    # the encoder's own setting is taken when none is named
    assert BERTScore(encoder=Encoder(model, long_texts="window")).long_texts == "window"


def test_signature_and_default(tiny_model_path):
    model = tiny_model_path("bert")
    truncating, windowed = BERTScore(model), BERTScore(model, long_texts="window")
    assert truncating.long_texts == "truncate" and "long_texts" not in truncating.signature
    assert windowed.signature == truncating.signature.replace("|precision:", "|long_texts:window|precision:")
    assert windowed.encoder is not truncating.encoder and windowed.encoder.loaded is truncating.encoder.loaded


# -- scores -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tiny_model", FAMILIES, indirect=True)
def test_within_the_limit_window_is_truncate_bit_for_bit(tiny_model):
    rng = np.random.default_rng(1)
    cands = [sentence(rng, int(rng.integers(1, 25))) for _ in range(12)] + [""]
    refs = [[sentence(rng, int(rng.integers(1, 25))) for _ in range(1 + k % 2)] for k in range(12)] + [["x"]]
    window = BERTScore(tiny_model, long_texts="window").score(cands, refs)
    truncate = BERTScore(tiny_model).score(cands, refs)
    assert truncate.details["truncated"] == 0 == window.details["windowed"] == window.details["windows"]
    assert_identical(window, truncate)


@pytest.mark.parametrize("tiny_model", ["bert", "roberta"], indirect=True)
def test_exactly_at_the_limit_and_one_token_over(tiny_model):
    tokenizer = raw_tokenizer(tiny_model)
    at_limit, over = text_of(tokenizer, MAX_LENGTH - 2), text_of(tokenizer, MAX_LENGTH - 1)
    assert [len(tokenizer.encode(t).ids) for t in (at_limit, over)] == [MAX_LENGTH, MAX_LENGTH + 1]
    ref = ["the cat sat on the mat"]
    truncating, windowed = BERTScore(tiny_model), BERTScore(tiny_model, long_texts="window")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # at the limit nothing is cut: no TruncationWarning
        at_t = truncating.score([at_limit], ref)
        at_w = windowed.score([at_limit], ref)
    assert_identical(at_w, at_t)
    assert at_w.details["windowed"] == 0 and at_t.details["truncated"] == 0
    with pytest.warns(TruncationWarning, match="1 of 2 distinct texts were longer than 128"):
        over_t = truncating.score([over], ref)
    over_w = windowed.score([over], ref)
    assert over_t.details["truncated"] == 1 and (over_w.details["windowed"], over_w.details["windows"]) == (1, 2)
    assert_close(over_w, reference_scores(truncating.encoder, tiny_model, [over], [ref]), REFERENCE_ATOL)
    # every token counts: the windowed text keeps its 129 rows, the truncated one 128
    with pytest.warns(TruncationWarning):
        assert truncating.encode(truncating.plan([over], ref)).lengths().max() == MAX_LENGTH
    assert windowed.encode(windowed.plan([over], ref)).lengths().max() == MAX_LENGTH + 1


@pytest.mark.parametrize("tiny_model", FAMILIES, indirect=True)
def test_matches_the_brute_force_reference(tiny_model):
    cands, refs = corpus()
    scorer = BERTScore(tiny_model, long_texts="window")
    result = scorer.score(cands, refs)
    assert_close(result, reference_scores(Encoder(tiny_model), tiny_model, cands, refs), REFERENCE_ATOL)
    tokenizer = raw_tokenizer(tiny_model)
    texts = {t.strip() for t in cands} | {r.strip() for g in refs for r in g}
    lengths = [len(tokenizer.encode(t).ids) for t in texts]
    long = [n for n in lengths if n > MAX_LENGTH]
    n_special = sum(frame_lengths(tokenizer, "a"))
    assert result.details["windowed"] == len(long) >= 5
    assert result.details["windows"] == sum(len(reference_windows(n - n_special, MAX_LENGTH - n_special))
                                           for n in long)
    assert result.details["truncated"] == 0


def test_idf_counts_every_token_of_a_windowed_text(tiny_model_path):
    model = tiny_model_path("bert")
    cands, refs = corpus(2)
    refs[4] = ["a short one", "another short one"]  # idf of a single empty reference would be degenerate
    result = BERTScore(model, idf=True, long_texts="window").score(cands, refs)
    assert_close(result, reference_scores(Encoder(model), model, cands, refs, idf=True), REFERENCE_ATOL)
    # idf_sents: a document's tokens beyond the maximum length count too
    tokenizer = raw_tokenizer(model)
    long_doc = text_of(tokenizer, MAX_LENGTH - 2) + " volcanic"
    volcanic = tokenizer.encode("volcanic", add_special_tokens=False).ids
    truncating = BERTScore(model, idf=True, idf_sents=[long_doc, "x"])
    windowed = BERTScore(model, idf=True, idf_sents=[long_doc, "x"], long_texts="window")
    assert all(windowed.idf_dict[i] == pytest.approx(math.log(3 / 2)) for i in volcanic)
    assert all(truncating.idf_dict[i] == pytest.approx(math.log(3)) for i in volcanic)  # cut off: unseen


def test_all_layers_equal_each_layer_alone(tiny_model_path):
    model = tiny_model_path("roberta")
    cands, refs = corpus(3)
    every = BERTScore(model, all_layers=True, long_texts="window").score(cands, refs)
    assert every.details["windowed"] > 0
    for layer in range(0, every.f1.shape[0]):
        one = BERTScore(model, layer, long_texts="window").score(cands, refs)
        for name in ("precision", "recall", "f1"):
            assert np.abs(getattr(every, name)[layer] - getattr(one, name)).max() <= ROUTE_ATOL, (layer, name)


@pytest.mark.parametrize("device_engine", [False, True])
def test_torch_backend(tiny_model_path, device_engine):
    pytest.importorskip("torch")
    model = tiny_model_path("bert")
    cands, refs = corpus(4)
    cands, refs = cands[:5], refs[:5]  # the reference runs every window alone through torch: slow
    scorer = BERTScore(model, backend="torch", long_texts="window", device_engine=device_engine)
    result = scorer.score(cands, refs)
    assert result.details["windowed"] > 0
    assert_close(result, reference_scores(Encoder(model, backend="torch"), model, cands, refs), REFERENCE_ATOL)
    onnx = BERTScore(model, long_texts="window").score(cands, refs)
    assert_close(result, np.stack([onnx.precision, onnx.recall, onnx.f1]), BACKENDS_ATOL)


def test_streaming_equals_one_call(tiny_model_path):
    model = tiny_model_path("bert")
    cands, refs = corpus(5)
    scorer = BERTScore(model, long_texts="window", idf=True)
    whole = scorer.score(cands, refs)
    for options in ({"chunk_size": 2}, {"chunk_size": 3, "cache_tokens": 5000}, {"max_tokens": 600}):
        streamed = np.array(list(scorer.score_iter(list(zip(cands, refs)), **options))).T
        assert np.abs(streamed - np.stack([whole.precision, whole.recall, whole.f1])).max() <= ROUTE_ATOL, options


def test_many_threads_on_one_scorer(tiny_model_path):
    model = tiny_model_path("bert")
    scorer = BERTScore(model, long_texts="window")
    jobs = [corpus(seed) for seed in range(8)]
    sequential = [scorer.score(c, r) for c, r in jobs]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(lambda job: scorer.score(*job), jobs * 2))
    for got, want in zip(concurrent, sequential * 2):
        assert_identical(got, want)
        assert got.details == want.details


def test_a_100k_token_text_stays_within_the_token_budget(tiny_model_path):
    """Hidden states exist one batch at a time: every model call is within the budget, and the
    call's peak allocation is the text's own rows plus small change (not every window's
    hidden states, which would be twice the rows again)."""
    model = tiny_model_path("bert")
    encoder = Encoder(model, long_texts="window", batch_tokens=1024)
    rng = np.random.default_rng(6)
    ids = encoder.tokenize([sentence(rng, 53_000)])
    assert len(ids[0]) >= 100_000
    inner, calls = encoder.runner, []

    class Counting(RunnerBase):
        returns, thread_safe, provider = "numpy", True, "counting"

        def __call__(self, input_ids, attention_mask):
            calls.append(input_ids.size)
            return inner(input_ids, attention_mask)

    encoder.runner = Counting()
    tracemalloc.start()
    try:
        store = encoder.embed_ids(ids)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rows = store.embeddings.nbytes
    assert store.embeddings.shape == (len(ids[0]), encoder.hidden_size) and np.isfinite(store.embeddings).all()
    assert max(calls) <= 1024 and len(calls) >= len(ids[0]) // 1024
    assert peak < 1.6 * rows, (peak, rows)  # all windows' hidden states at once: > 3x rows
    # the same rows as the windows run one by one (the first and the last window's specials included)
    first = encoder.embed_ids([ids[0][:MAX_LENGTH - 1].tolist() + [ids[0][-1]]])
    assert np.abs(store.embeddings[:60] - first.embeddings[:60]).max() <= ROUTE_ATOL


# -- command line and service -------------------------------------------------------------------


def test_cli_flag(tiny_model_path, tmp_path, capsys):
    from rapidscore.cli import main

    model = tiny_model_path("bert")
    cands, refs = corpus(7)
    refs = [group[0] or "x" for group in refs]
    (tmp_path / "c.txt").write_text("\n".join(cands) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    base = ["bertscore", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"), "-m", str(model),
            "--threads", "1", "-b", "0"]
    direct = BERTScore(model, long_texts="window", num_threads=1).score(cands, refs)
    assert main([*base, "--long-texts", "window", "--json", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["f1"] == direct.f1.tolist() and "|long_texts:window|" in document["signature"]
    assert document["long_texts"] == {"mode": "window", "max_length": MAX_LENGTH, "truncated": 0,
                                      "windowed": direct.details["windowed"], "windows": direct.details["windows"]}
    assert main([*base, "--long-texts", "window"]) == 0
    captured = capsys.readouterr()
    assert f"{direct.details['windowed']} of {direct.details['unique_sentences']} distinct texts were longer " \
           f"than {MAX_LENGTH} tokens: embedded in {direct.details['windows']} windows" in captured.err
    assert captured.out.split(" P: ")[1].startswith(f"{direct.mean_precision:.6f}")
    # streaming honours it too
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"candidate": c, "reference": r}) + "\n"
                                                  for c, r in zip(cands, refs)), encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    assert main(["bertscore", "--input", str(tmp_path / "pairs.jsonl"), "--output", str(out), "-m", str(model),
                 "--threads", "1", "-b", "0", "--long-texts", "window", "--chunk-size", "3"]) == 0
    assert "embedded in" in capsys.readouterr().err
    streamed = [json.loads(line)["f1"] for line in out.read_text().splitlines()]
    assert np.abs(np.array(streamed) - direct.f1).max() <= ROUTE_ATOL
    with pytest.raises(SystemExit):
        main([*base, "--long-texts", "windows"])
    err = capsys.readouterr().err
    assert "invalid choice: 'windows'" in err and "truncate" in err and "window" in err


def test_cli_default_truncates(tiny_model_path, tmp_path, capsys):
    from rapidscore.cli import main

    model = tiny_model_path("bert")
    cands, refs = corpus(7)
    with pytest.warns(TruncationWarning):
        assert main(["bertscore", "-c", cands[7], "-r", refs[0][0], "-m", str(model), "--json", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["long_texts"]["mode"] == "truncate" and document["long_texts"]["truncated"] >= 1
    assert "long_texts" not in document["signature"]


def test_service_option(tiny_model_path):
    from rapidscore.cli import build_parser
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    model = tiny_model_path("bert")
    assert build_parser().parse_args(["serve", "--long-texts", "window"]).long_texts == "window"
    assert build_parser().parse_args(["serve"]).long_texts is None  # from --config, else ServeConfig's default
    assert ServeConfig().long_texts == "truncate"
    config = ServeConfig(model=str(model), long_texts="window", warmup=False, workers=1,
                         ner_label_similarity="exact")
    service = ScoringService(config)
    service.start()
    try:
        assert service.scorer("bertscore") is not None
        requests = [corpus(seed) for seed in range(4)]
        futures = [service.scorer("bertscore").submit(c, r) for c, r in requests]
        direct = BERTScore(model, long_texts="window", **config.encoder_options)
        for future, (cands, refs) in zip(futures, requests):
            got, want = future.result(60), direct.score(cands, refs)
            assert "|long_texts:window|" in got.signature and got.signature == want.signature
            assert got.details["windowed"] == want.details["windowed"] > 0
            assert np.abs(np.stack([got.f1, got.precision]) - np.stack([want.f1, want.precision])).max() <= ROUTE_ATOL
    finally:
        service.close()


def test_drop_in_keeps_truncating(tiny_model_path):
    from rapidscore import bert_score

    cands, refs = corpus(8)
    with pytest.warns(TruncationWarning):
        bert_score.score(cands[7:], [refs[7][0]], model_type=str(tiny_model_path("bert")), num_layers=2)


@pytest.mark.slow
def test_minilm_long_text_matches_the_reference(minilm_path):
    text = " ".join(["Penguins huddle together to survive the Antarctic winter, taking turns at the cold edge "
                     "of the group while the others rest in the middle.",
                     "The quarterly earnings report exceeded analyst expectations by a wide margin.",
                     "She tuned the violin before the evening concert began."] * 30)
    cands = [text, "A penguin colony in winter."]
    refs = [["Emperor penguins share warmth in huddles through the polar night. " * 50, "short"], [text]]
    scorer = BERTScore(minilm_path, long_texts="window")
    result = scorer.score(cands, refs)
    assert result.details["windowed"] == 2 and result.details["windows"] >= 5
    assert_close(result, reference_scores(Encoder(minilm_path), minilm_path, cands, refs), REFERENCE_ATOL)

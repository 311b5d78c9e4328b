"""The classifier refusal detector (issue 41): tiny random sequence classifiers of the families real
refusal classifiers use, against ``transformers.pipeline("text-classification")`` on every backend,
bad input, thread safety, and every place a detector goes (SELECT's CLI, the refusal metric, RGB)."""

from __future__ import annotations

import importlib.util
import json
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.errors import RapidscoreError, TruncationWarning
from rapidscore.testing.tiny_classifiers import CLASSIFIER_FAMILIES, tiny_classifier_dir

pytest.importorskip("transformers")

TEXTS = ["I'm sorry, but I can't help with that.", "The capital of France is Paris.", "Abstained.",
         "Sure! Mix flour, eggs and milk, then fry.", "I cannot answer questions about this topic.",
         "Tokyo is the capital of Japan; it has many trains."]
LONG = " ".join(f"word{k} and the cat number {k} sat on the mat" for k in range(40))  # past the 128 tokens
BACKENDS = ["onnx", "torch"] + (["openvino"] if importlib.util.find_spec("openvino") else [])
REFUSAL = {2: "REJECTION", 1: "REFUSAL"}


@pytest.fixture(scope="session")
def classifier_path(tiny_models_root):
    def build(family: str, num_labels: int = 2, **options):
        return tiny_classifier_dir(family, num_labels, tiny_models_root, **options)

    return build


def pipeline_scores(model_dir, texts, label: str) -> np.ndarray:
    import transformers

    pipe = transformers.pipeline("text-classification", model=str(model_dir), top_k=None, truncation=True)
    return np.array([{r["label"]: r["score"] for r in out}[label] for out in pipe(list(texts))])


def split_threshold(probs: np.ndarray) -> float:
    """A threshold between two of the probabilities (mixed decisions, none on the threshold)."""
    ordered = np.sort(probs)
    k = len(ordered) // 2
    return float((ordered[k - 1] + ordered[k]) / 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num_labels", [2, 1])
@pytest.mark.parametrize("family", [f if f == "bert" else pytest.param(f, marks=pytest.mark.slow)
                                    for f in CLASSIFIER_FAMILIES])
def test_probabilities_and_decisions_equal_the_pipeline(family, num_labels, backend, classifier_path):
    from rapidscore.abstention import detect_refusal, get_detector

    if family != "bert" and backend == "openvino":
        pytest.skip("OpenVINO runs the same graph: BERT covers it")
    model = classifier_path(family, num_labels)
    texts = [*TEXTS, LONG]
    expected = pipeline_scores(model, texts, REFUSAL[num_labels])
    detector = get_detector("classifier", model=model, backend=backend)
    assert detector.classifier.backend == backend  # every family exports with its head here (ModernBERT too)
    with pytest.warns(TruncationWarning, match="1 of 7 distinct texts"):
        probs = detector.probabilities(texts)
    np.testing.assert_allclose(probs, expected, atol=1e-5, rtol=0)
    with pytest.warns(TruncationWarning):
        default = detector(texts)
    pipe_default = expected > 0.5  # argmax of two labels, or a single logit's sigmoid > 0.5
    assert default.tolist() == pipe_default.tolist()
    threshold = split_threshold(expected)
    with pytest.warns(TruncationWarning):
        decided = detect_refusal(texts, "classifier", model=model, backend=backend, threshold=threshold)
    assert decided.tolist() == (expected > threshold).tolist()
    assert 0 < decided.sum() < len(texts)


def test_labels_by_name_id_or_pattern_and_multi_label(classifier_path):
    from rapidscore.abstention.classifier import ClassifierDetector

    model = classifier_path("bert", 3, id2label={0: "safe", 1: "Refusal", 2: "other"},
                            problem_type="multi_label_classification")
    detector = ClassifierDetector(model)
    assert detector.refusal_label == "Refusal" and detector.classifier.multi_label
    import transformers

    pipe = transformers.pipeline("text-classification", model=str(model), top_k=None)
    for label in ("safe", "other", 0, 2):
        chosen = ClassifierDetector(model, refusal_label=label)
        name = label if isinstance(label, str) else chosen.labels[label]
        expected = np.array([{r["label"]: r["score"] for r in out}[name] for out in pipe(TEXTS)])  # sigmoid each
        np.testing.assert_allclose(chosen.scores(TEXTS), expected, atol=1e-5, rtol=0)
        assert chosen.detect(TEXTS).tolist() == (expected > 0.5).tolist()


def test_bad_input_gets_one_clear_error(classifier_path, minilm_path):
    from rapidscore.abstention import get_detector
    from rapidscore.abstention.classifier import ClassifierLabelError
    from rapidscore.encoder.classifier import NotAClassifierError

    model = classifier_path("bert", 2)
    with pytest.raises(NotAClassifierError, match="no sequence-classification head") as info:
        get_detector("classifier", model=minilm_path)
    assert isinstance(info.value, (RapidscoreError, ValueError))
    with pytest.raises(ClassifierLabelError, match=r"'maybe' is not a label .*0: 'NORMAL', 1: 'REJECTION'"):
        get_detector("classifier", model=model, refusal_label="maybe")
    with pytest.raises(ClassifierLabelError, match="refusal_label=5"):
        get_detector("classifier", model=model, refusal_label=5)
    ambiguous = classifier_path("bert", 2, id2label={0: "refused", 1: "rejected"})
    with pytest.raises(ClassifierLabelError, match=r"several labels .*0: 'refused', 1: 'rejected'"):
        get_detector("classifier", model=ambiguous)
    unnamed = classifier_path("bert", 2, id2label={0: "LABEL_0", 1: "LABEL_1"})
    with pytest.raises(ClassifierLabelError, match="no label named like refusal"):
        get_detector("classifier", model=unnamed)
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match=r"threshold must be a probability in \[0, 1\]") as info:
            get_detector("classifier", model=model, threshold=bad)
        assert str(bad) in str(info.value) or repr(bad) in str(info.value)
    with pytest.raises(ValueError, match="needs model="):
        get_detector("classifier")
    with pytest.raises(ValueError, match="precision='int8' does not run a classifier"):
        get_detector("classifier", model=model, precision="int8")


def test_long_texts_window_takes_the_maximum_over_windows(classifier_path):
    import transformers

    from rapidscore.abstention.classifier import ClassifierDetector
    from rapidscore.encoder.tokens.windows import split_windows

    model = classifier_path("roberta", 2)
    detector = ClassifierDetector(model, long_texts="window")
    texts = [TEXTS[0], LONG, TEXTS[1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)  # windows truncate nothing
        probs = detector.probabilities(texts)
    # the reference: each window's text run by the torch model, the maximum taken
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model))
    torch_model = transformers.AutoModelForSequenceClassification.from_pretrained(str(model)).eval()
    ids = [np.asarray(tokenizer(LONG)["input_ids"])]
    prefix, suffix = detector.classifier.tokenizer.framing
    plan = split_windows(ids, np.array([0, len(ids[0])]), detector.classifier.max_length, prefix, suffix)
    assert len(plan.inputs) > 1
    import torch

    with torch.inference_mode():
        window_probs = [torch.softmax(torch_model(input_ids=torch.from_numpy(w)[None]).logits, -1)[0, 1].item()
                        for w in plan.inputs]
    assert probs[1] == pytest.approx(max(window_probs), abs=1e-5)
    np.testing.assert_allclose(probs[[0, 2]], pipeline_scores(model, [TEXTS[0], TEXTS[1]], "REJECTION"), atol=1e-5)


def test_one_detector_from_eight_threads_equals_sequential(classifier_path):
    from rapidscore.abstention import get_detector

    detector = get_detector("classifier", model=classifier_path("bert", 2))
    batches = [[f"{text} ({k})" for text in TEXTS[k % 3:]] for k in range(16)]
    expected = [detector.probabilities(batch) for batch in batches]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(detector.probabilities, batches))
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)


def test_the_export_is_cached_and_a_damaged_entry_exported_again(classifier_path, tmp_path):
    from rapidscore.encoder.export.classifier_export import cached_classifier_export

    model = classifier_path("bert", 1)
    entry, exported = cached_classifier_export(model, cache_dir=tmp_path)
    assert exported and json.loads((entry / "meta.json").read_text())["labels"] == ["REFUSAL"]
    assert cached_classifier_export(model, cache_dir=tmp_path) == (entry, False)
    with open(entry / "model.onnx", "ab") as handle:
        handle.write(b"x")
    with pytest.warns(UserWarning, match="damaged"):
        again, exported = cached_classifier_export(model, cache_dir=tmp_path)
    assert again == entry and exported


def test_refusal_metric_stream_and_signature(classifier_path):
    from rapidscore.abstention import detect_refusal
    from rapidscore.metrics import get_metric
    from rapidscore.streaming import score_stream

    model = str(classifier_path("bert", 2))
    threshold = split_threshold(pipeline_scores(model, TEXTS, "REJECTION"))
    rows = list(score_stream("refusal", iter(TEXTS), chunk_size=4, method="classifier", model=model,
                             threshold=threshold))
    expected = detect_refusal(TEXTS, "classifier", model=model, threshold=threshold)
    assert [row["refusal"] for row in rows] == expected.tolist()
    metric = get_metric("refusal")
    engine = metric.build(method="classifier", model=model)
    assert metric.signature(engine) == f"refusal|method:classifier|model:{model}|rapidscore"


def test_refusal_command_with_a_classifier(classifier_path, tmp_path):
    from rapidscore.abstention import detect_refusal
    from rapidscore.cli import main

    model = str(classifier_path("bert", 2))
    threshold = split_threshold(pipeline_scores(model, TEXTS, "REJECTION"))
    source = tmp_path / "responses.jsonl"
    source.write_text("".join(json.dumps({"response": t}) + "\n" for t in TEXTS))
    out = tmp_path / "out.jsonl"
    assert main(["refusal", "-i", str(source), "-o", str(out), "--set", "method=classifier", "--set",
                 f"model={model}", "--set", f"threshold={threshold}", "-q"]) == 0
    got = [json.loads(line)["refusal"] for line in out.read_text().splitlines()]
    assert got == detect_refusal(TEXTS, "classifier", model=model, threshold=threshold).tolist()


def test_abstention_command_with_a_classifier(classifier_path, tmp_path, capsys):
    from pathlib import Path

    from rapidscore.cli import main

    examples = Path(__file__).resolve().parents[2] / "examples" / "abstention"
    model = str(classifier_path("bert", 2))
    assert main(["abstention", str(examples / "results"), "--method", "classifier", "--model", model,
                 "--recompute", "--json", "-q", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert f"model:{model}" in json.dumps(report)
    assert "method:classifier" in json.dumps(report)
    assert main(["abstention", str(examples / "results"), "--method", "keyword", "--model", model, "-q"]) != 0
    assert "--model and --refusal-label apply to --method classifier" in capsys.readouterr().err


def test_rgb_negative_rejection_with_a_classifier(classifier_path):
    from rapidscore.abstention import detect_refusal, rgb_negative_rejection

    model = str(classifier_path("roberta", 2))
    result = rgb_negative_rejection(TEXTS, method="classifier", model=model, threshold=0.0)
    assert result.n_rejected == len(TEXTS) == result.n_negative
    decisions = detect_refusal(TEXTS, "classifier", model=model)
    assert rgb_negative_rejection(TEXTS, method="classifier", model=model).n_rejected == int(decisions.sum())

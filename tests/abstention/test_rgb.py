"""RGB negative rejection: rates and Wilson intervals against an independent computation (the
formula written here with plain Python, and scipy.stats' binomtest), the detector's decisions
against detect_refusal, the command's JSON, and bad input named."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pytest
from scipy import stats

from rapidscore.abstention import detect_refusal, get_detector
from rapidscore.abstention.rgb import FlagError, RGBRejectionResult, rgb_negative_rejection, wilson_interval
from rapidscore.cli import main
from rapidscore.common.metric import ColumnError
from rapidscore.errors import RapidscoreError

RESPONSES = [
    "I can not answer the question because of the insufficient information in documents.",
    "I'm sorry, but I cannot answer that based on the documents.",
    "The 2022 Nobel Prize in Literature went to Annie Ernaux.",
    "Abstained.",
    "The documents do not say; I must abstain from answering.",
    "Paris is the capital of France.",
    "I cannot help with that.",
    "The film premiered in 2021 at Cannes.",
    "Sorry, I don't know.",
    "It was released on 3 March.",
]
NO_SUPPORT = [True, True, True, True, True, False, False, False, True, False]


def plain_wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval as the textbooks write it (Wilson 1927; Agresti & Coull 1998)."""
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_rates_and_intervals_equal_a_plain_computation():
    result = rgb_negative_rejection(RESPONSES, NO_SUPPORT)
    decisions = detect_refusal(RESPONSES).tolist()
    negatives = [d for d, flag in zip(decisions, NO_SUPPORT) if flag]
    supported = [d for d, flag in zip(decisions, NO_SUPPORT) if not flag]
    assert result.refused.tolist() == decisions
    assert (result.n_negative, result.n_rejected) == (len(negatives), sum(negatives))
    assert (result.n_supported, result.n_false_refusals) == (len(supported), sum(supported))
    assert 0 < sum(negatives) < len(negatives) and 0 < sum(supported) < len(supported)  # neither rate trivial
    assert result.rejection_rate == sum(negatives) / len(negatives)
    assert result.false_refusal_rate == sum(supported) / len(supported)
    for got, k, n in ((result.rejection_interval, sum(negatives), len(negatives)),
                      (result.false_refusal_interval, sum(supported), len(supported))):
        assert got == pytest.approx(plain_wilson(k, n, 0.95), abs=1e-12)
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert got == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_wilson_interval_equals_scipy(confidence):
    for n in (1, 2, 3, 7, 10, 33, 100, 1000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ci = stats.binomtest(k, n).proportion_ci(confidence, method="wilson")
            assert wilson_interval(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)


def test_every_question_is_a_negative_without_flags():
    result = rgb_negative_rejection(RESPONSES, method="arditi", confidence=0.9)
    decisions = detect_refusal(RESPONSES, method="arditi")
    assert result.no_support.all() and result.refused.tolist() == decisions.tolist()
    assert result.rejection_rate == decisions.sum() / len(RESPONSES)
    assert result.rejection_interval == pytest.approx(plain_wilson(int(decisions.sum()), len(RESPONSES), 0.9),
                                                      abs=1e-12)
    assert result.false_refusal_rate is None and result.false_refusal_interval is None and result.n_supported == 0
    assert result.signature.startswith("rgb|method:arditi|interval:wilson-90|negatives:all|version:")
    assert "false refusal" not in str(result)


def test_result_conventions():
    result = rgb_negative_rejection(np.array(RESPONSES), np.array(NO_SUPPORT))
    assert isinstance(result, RGBRejectionResult)
    document = json.loads(json.dumps(result.to_dict()))
    assert document["rejection_rate"] == result.rejection_rate
    assert document["rejection_interval"] == list(result.rejection_interval)
    assert document["false_refusal_interval"] == list(result.false_refusal_interval)
    assert document["refused"] == result.refused.tolist() and document["no_support"] == NO_SUPPORT
    assert document["signature"] == result.signature
    assert result.signature.startswith("rgb|method:heuristic|interval:wilson-95|negatives:flagged|threshold:")
    frame = result.to_frame()
    assert frame.columns.tolist() == ["no_support", "refused"] and frame.attrs["signature"] == result.signature
    assert frame["refused"].tolist() == result.refused.tolist()
    text = str(result)
    assert text.startswith(result.signature) and f"({result.n_rejected}/{result.n_negative})" in text
    assert f"false refusal: {result.false_refusal_rate:.4f}" in text


def test_chain_of_thought_records_and_a_callable_detector():
    records = [{"complete": "Thinking... I cannot answer.", "answer": r} for r in RESPONSES]
    assert rgb_negative_rejection(records, NO_SUPPORT).refused.tolist() == detect_refusal(RESPONSES).tolist()
    by_callable = rgb_negative_rejection(RESPONSES, NO_SUPPORT, method=lambda text: "insufficient" in text)
    assert by_callable.refused.tolist() == ["insufficient" in r for r in RESPONSES]


def test_rgb_phrase_check_equals_rgbs_own_test():
    responses = [*RESPONSES, "信息不足, 无法回答.", "INSUFFICIENT INFORMATION.", "The insufficient  information..."]
    result = rgb_negative_rejection(responses, [True] * len(responses), method="rgb")
    # RGB's scripts: '信息不足' in prediction or 'insufficient information' in prediction
    assert result.refused.tolist() == ["信息不足" in r or "insufficient information" in r for r in responses]
    assert result.refused.sum() == 2 and result.signature.startswith("rgb|method:rgb|interval:wilson-95|")
    # SELECT's detectors miss RGB's requested reply ("can not" in two words): why "rgb" exists
    assert not detect_refusal(RESPONSES[:1])[0]
    with pytest.raises(FlagError, match=r"method 'rgb' .* takes no detector options, got \['threshold'\]"):
        rgb_negative_rejection(responses, method="rgb", threshold=0.5)


@pytest.mark.slow
def test_embedding_detector_decisions_equal_detect_refusal(minilm_path):
    detector = get_detector("embedding", model=str(minilm_path))
    result = rgb_negative_rejection(RESPONSES, NO_SUPPORT, method=detector)
    assert result.refused.tolist() == detect_refusal(RESPONSES, method=detector).tolist()
    assert f"model:{minilm_path}" in result.signature and "threshold:0.6" in result.signature


def test_bad_input_is_named():
    with pytest.raises(ColumnError, match="no_support has 3 flags for 10 responses"):
        rgb_negative_rejection(RESPONSES, NO_SUPPORT[:3])
    with pytest.raises(FlagError, match=r"no_support\[2\] = 1 \(int\) is not a bool"):
        rgb_negative_rejection(RESPONSES[:3], [True, False, 1])
    with pytest.raises(FlagError, match=r"no_support\[0\] = 'yes' \(str\) is not a bool"):
        rgb_negative_rejection(RESPONSES[:1], ["yes"])
    with pytest.raises(FlagError, match=r"no_support\[1\] = None"):
        rgb_negative_rejection(RESPONSES[:2], [True, None])
    with pytest.raises(ColumnError, match="no_support marks no question as having no supporting document"):
        rgb_negative_rejection(RESPONSES, [False] * len(RESPONSES))
    with pytest.raises(ColumnError, match="responses is empty"):
        rgb_negative_rejection([], [])
    with pytest.raises(TypeError, match="response at position 1 must be a str"):
        rgb_negative_rejection(["fine", 3])
    with pytest.raises(ValueError, match="confidence must be a number in"):
        rgb_negative_rejection(RESPONSES, confidence=95)
    with pytest.raises(ValueError, match="unknown refusal method 'polite'"):
        rgb_negative_rejection(RESPONSES, method="polite")
    with pytest.raises(ValueError, match="successes must be an int in"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match="n must be a positive int"):
        wilson_interval(0, 0)
    assert issubclass(FlagError, RapidscoreError) and issubclass(FlagError, TypeError)
    assert issubclass(ColumnError, RapidscoreError) and issubclass(ColumnError, ValueError)


def test_a_shared_detector_from_several_threads():
    detector = get_detector("heuristic")
    expected = rgb_negative_rejection(RESPONSES, NO_SUPPORT, method=detector).to_dict()
    results: list = []

    def work() -> None:
        for _ in range(5):
            results.append(rgb_negative_rejection(RESPONSES, NO_SUPPORT, method=detector).to_dict())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 20 and all(r == expected for r in results)


def test_command_json_equals_the_api(tmp_path, capsys):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"response": r, "noise_only": f}) + "\n" for r, f in zip(RESPONSES, NO_SUPPORT)))
    assert main(["rgb", str(path), "--no-support-column", "noise_only", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out) == rgb_negative_rejection(RESPONSES, NO_SUPPORT).to_dict()
    assert main(["rgb", str(path), "--no-support-column", "noise_only", "--method", "rgb", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out) == rgb_negative_rejection(RESPONSES, NO_SUPPORT, method="rgb").to_dict()
    assert main(["rgb", str(path), "--method", "arditi", "-q"]) == 0
    assert capsys.readouterr().out.strip() == str(rgb_negative_rejection(RESPONSES, method="arditi"))
    table = tmp_path / "answers.csv"  # CSV cells are text: true/false are the flags
    table.write_text("response,noise_only\n"
                     + "".join(f"\"{r}\",{str(f).lower()}\n" for r, f in zip(RESPONSES, NO_SUPPORT)))
    assert main(["rgb", str(table), "--no-support-column", "noise_only", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out) == rgb_negative_rejection(RESPONSES, NO_SUPPORT).to_dict()


def test_command_errors_name_the_column(tmp_path, capsys):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"response": r, "noise_only": "maybe" if i == 4 else True}) + "\n"
                            for i, r in enumerate(RESPONSES)))
    assert main(["rgb", str(path), "--no-support-column", "noise_only", "-q"]) == 2
    error = capsys.readouterr().err
    assert "rapidscore rgb: error:" in error and "noise_only[4] = 'maybe' (str) is not a bool" in error
    path.write_text("".join(json.dumps({"response": r, "noise_only": False}) + "\n" for r in RESPONSES))
    assert main(["rgb", str(path), "--no-support-column", "noise_only", "-q"]) == 2
    assert "noise_only marks no question as having no supporting document" in capsys.readouterr().err
    assert main(["rgb", str(path), "--model", "m", "-q"]) == 2
    assert "--model is the embedding detector's" in capsys.readouterr().err
    assert main(["rgb", str(path), "--method", "rgb", "--threshold", "0.5", "-q"]) == 2
    assert "--method rgb takes none" in capsys.readouterr().err

"""Runs the bad-input corpus (bad_inputs.py): every reproducer of issue 16 gives a clear exception
with the expected message, or a correct result; every CLI case exits 2 with a message."""

from __future__ import annotations

import pytest

from rapidscore.cli import main

from .bad_inputs import API_CASES, CLI_CASES, BadFiles


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> BadFiles:
    return BadFiles(tmp_path_factory.mktemp("bad_inputs")).make()


@pytest.mark.parametrize(("call", "exception", "fragment"), [case[1:] for case in API_CASES],
                         ids=[case[0] for case in API_CASES])
def test_api_case(files, call, exception, fragment) -> None:
    if exception is None:
        call(files)  # the call checks its own result
        return
    with pytest.raises(exception) as info:
        call(files)
    assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(("argv", "fragment"), [case[1:] for case in CLI_CASES], ids=[case[0] for case in CLI_CASES])
def test_cli_case(files, argv, fragment, capsys) -> None:
    if "cuda" in argv and _onnx_cuda_available():
        pytest.skip("onnxruntime has the CUDA provider here: --device cuda would run, not fail")
    paths = {name: getattr(files, name) for name in _placeholders(argv) if name != "root"}
    paths["root"] = str(files.root)
    status = main([arg.format(**paths) for arg in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"rapidscore {argv[0]}: error: " in err and fragment in err, err
    assert "Traceback" not in err


def _onnx_cuda_available() -> bool:
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def _placeholders(argv):
    import string

    return {field for arg in argv for _, field, _, _ in string.Formatter().parse(arg) if field}


def test_corpus_ids_are_unique() -> None:
    ids = [case[0] for case in API_CASES] + [case[0] for case in CLI_CASES]
    assert len(ids) == len(set(ids))


def test_abstention_cli_scores_a_response_with_a_lone_surrogate(files, capsys) -> None:
    """A JSON "\\ud800" escape in a response: a result (the refusal is found), not a traceback."""
    status = main(["abstention", files.surrogate_table, "--json", "-q"])
    out = capsys.readouterr()
    assert status == 0, out.err
    rows = __import__("json").loads(out.out)["rows"]
    assert [(row["metric"], row["mean"]) for row in rows] == [("abstention", 1.0)], rows


def test_bertscore_warns_when_a_missing_file_is_scored_as_a_sentence(files, capsys) -> None:
    """bert-score scores ``-c typo.txt`` as the sentence "typo.txt" when no such file exists;
    rapidscore does the same (compatibility) but says so on stderr."""
    status = main(["bertscore", "-c", "typo.txt", "-r", "also_typo.txt", "-q"])
    err = capsys.readouterr().err
    assert status == 0
    assert "warning: no file 'typo.txt'; scoring it as a sentence" in err
    assert "warning: no file 'also_typo.txt'" in err

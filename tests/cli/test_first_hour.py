"""Issue 40 item 3: the first hour's stumbles, one test (or a few) each.

1. A model that cannot be loaded offline (the seed's ``bert_score.score(..., lang="en")`` picks
   roberta-large) is one ModelNotFoundError line naming the embedded model, in the drop-in and in
   ``rapidscore bertscore`` alike; no chained traceback unless RAPIDSCORE_DEBUG=1.
2. The drop-in knows the embedded model's layer and baseline under any spelling.
3. ``rapidscore bertscore --rescale_with_baseline`` needs no --lang on the embedded model, and
   ``-m all-MiniLM-L6-v2 --lang en`` keeps it.
4. SELECT's release layout: taxonomies found in data/SELECT/atoms/ and compositions/,
   taxonomy_plus.json before taxonomy.json; the report names the cells without results.
5. Display names as a paper writes them, on SELECT's real folder names and unknown ones.
6. ``rapidscore nrr`` prints per-answer rows with --table and lists the few rejected answers.
7. One progress policy: no bar on a captured stderr by default in any command; --progress forces one.

The hub is never reached: item 1 mocks its failure; models are the embedded all-MiniLM-L6-v2
(slow: it loads the real model) or the tiny random BERT (fast).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest

import rapidscore.bert_score as drop_in
from rapidscore.abstention.names import Names, display_model, display_technique, model_labels
from rapidscore.abstention.pipeline import find_experiments, find_taxonomy
from rapidscore.abstention.report import missing_note
from rapidscore.cli import main
from rapidscore.errors import ModelNotFoundError
from rapidscore.testing.command_output import error_line, write_lines

ANSWERS = ["Rob Halford is the lead vocalist of the heavy metal band Judas Priest.",
           "Rob Halford is a British singer.", "He plays football for a club in Madrid."]
EXPECTED = ["Rob Halford is the singer of Judas Priest."] * 3
BAR = re.compile(r"\d+%\|")  # tqdm's bar: "50%|█████     | 1/2"


# ---- 1. a model that cannot be loaded offline ----------------------------------------------------
@pytest.fixture
def hub_unreachable(monkeypatch) -> list[str]:
    """The hub as it fails without a network: nothing cached, and the download raises a chained
    error (what made the 80-line traceback). HF_HUB_OFFLINE unset: the download is tried."""
    import huggingface_hub

    calls = []

    def snapshot_download(repo_id, *args, local_files_only=False, **kwargs) -> None:
        calls.append(repo_id)
        if local_files_only:
            raise FileNotFoundError(f"{repo_id} is not in the cache")
        try:
            raise ConnectionError("Max retries exceeded with url: /api/models/roberta-large\n"
                                  "(Caused by NameResolutionError: Failed to resolve 'huggingface.co')")
        except ConnectionError as exc:
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files,\n"
                          "and couldn't find them in the cached files.") from exc

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("RAPIDSCORE_DEBUG", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_drop_in_offline_model_is_one_line_naming_the_embedded_model(hub_unreachable) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        drop_in.score(ANSWERS, EXPECTED, lang="en", rescale_with_baseline=True)
    assert "roberta-large" in hub_unreachable  # the hub was asked (mocked), not the network
    message = str(info.value)
    assert "\n" not in message
    assert 'model_type="all-MiniLM-L6-v2"' in message and "hf download roberta-large" in message
    assert "lang='en' picks bert-score's model roberta-large" in message
    assert isinstance(info.value, ValueError)  # the class callers catch did not change
    # no chained traceback: the hub's errors are left out
    assert info.value.__cause__ is None and info.value.__suppress_context__
    printed = "".join(traceback.format_exception(info.value))
    assert "direct cause" not in printed and "During handling" not in printed
    assert "ConnectionError" not in printed.replace("Hub error: OSError", "")
    with pytest.raises(ModelNotFoundError, match='model_type="all-MiniLM-L6-v2"') as scorer_info:
        drop_in.BERTScorer(lang="en")
    assert scorer_info.value.__cause__ is None


def test_rapidscore_debug_keeps_the_chained_traceback(hub_unreachable, monkeypatch) -> None:
    monkeypatch.setenv("RAPIDSCORE_DEBUG", "1")
    with pytest.raises(ModelNotFoundError) as info:
        drop_in.score(ANSWERS, EXPECTED, lang="en")
    assert isinstance(info.value.__cause__, ModelNotFoundError)  # the loader's, chained to the hub's
    assert isinstance(info.value.__cause__.__cause__, OSError)


def test_cli_says_what_the_drop_in_says(hub_unreachable, capsys) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        drop_in.score(ANSWERS, EXPECTED, lang="en")
    assert main(["bertscore", "-c", ANSWERS[0], "-r", EXPECTED[0], "--lang", "en", "--rescale_with_baseline"]) == 2
    line = error_line(capsys)
    assert line.startswith("rapidscore bertscore: error: --lang 'en': bert-score's model for it is roberta-large")
    # the same loader message and the same offline choice, in each front end's words
    core = str(info.value).split(", which cannot be loaded here: ", 1)[1].split(". Offline, ")[0]
    assert core in line
    assert "Offline, use the embedded all-MiniLM-L6-v2 instead" in line and "-m all-MiniLM-L6-v2 --lang en" in line
    assert "Offline, use the embedded all-MiniLM-L6-v2 instead" in str(info.value)


# ---- 2. the drop-in knows the embedded model ------------------------------------------------------
@pytest.mark.slow
def test_drop_in_knows_the_embedded_models_layer_and_baseline(minilm_path, capsys) -> None:
    from rapidscore.bertscore import BERTScore

    expected = BERTScore("all-MiniLM-L6-v2", lang="en", rescale_with_baseline=True).score(
        ANSWERS, EXPECTED, reference_batch_size=64)
    for spelling in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", str(minilm_path)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (p, r, f), hash_ = drop_in.score(ANSWERS, EXPECTED, model_type=spelling, lang="en",
                                            rescale_with_baseline=True, return_hash=True)
        assert not [w for w in caught if "Baseline not Found" in str(w.message)], spelling
        assert "_L6_" in hash_ and "rescaled" in hash_
        np.testing.assert_allclose(f.numpy(), expected.f1, rtol=0, atol=1e-6)
        np.testing.assert_allclose(p.numpy(), expected.precision, rtol=0, atol=1e-6)
        np.testing.assert_allclose(r.numpy(), expected.recall, rtol=0, atol=1e-6)
    scorer = drop_in.BERTScorer(model_type="all-MiniLM-L6-v2", lang="en", rescale_with_baseline=True)
    assert scorer.num_layers == 6 and scorer.baseline_vals.shape == (3,)
    # 3. the CLI: --rescale_with_baseline on the default (embedded) model needs no --lang
    cands = ["--cand", ANSWERS[0], "-r", EXPECTED[0]]
    assert main(["bertscore", *cands, "--rescale_with_baseline", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["f1"][0] == pytest.approx(float(expected.f1[0]), abs=1e-6)
    assert "rescaled" in default["hash"] and default["hash"].startswith("sentence-transformers/all-MiniLM-L6-v2_L6")
    # --lang en with the embedded model named keeps it (no roberta-large)
    assert main(["bertscore", *cands, "-m", "all-MiniLM-L6-v2", "--lang", "en", "--rescale_with_baseline",
                 "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["f1"] == default["f1"] and named["hash"].startswith("all-MiniLM-L6-v2_L6")


def test_another_directory_still_needs_num_layers(tmp_path) -> None:
    # the embedded model's layer is known; any other model outside the reference's table is not
    with pytest.raises(ValueError, match="no default layer"):
        drop_in.score(["a"], ["b"], model_type=str(tmp_path))


# ---- 3. the CLI's circle --------------------------------------------------------------------------
def test_cli_rescale_without_lang_uses_the_embedded_models_english_baseline(monkeypatch) -> None:
    # --rescale_with_baseline asked for --lang, and --lang en swapped in roberta-large
    from rapidscore.bertscore import baselines
    from rapidscore.bertscore import cli as bertscore_cli
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    seen = {}
    real_baseline_path = baselines.default_baseline_path

    def baseline_path(lang, model):
        seen.update(baseline=(lang, model))
        return real_baseline_path(lang, model)

    def encoder_settings(model, **options):  # the model resolve_settings chose, before anything loads
        seen.update(model=model)
        raise SystemExit(0)

    monkeypatch.setattr(baselines, "default_baseline_path", baseline_path)
    monkeypatch.setattr("rapidscore.encoder.settings.resolve_encoder_settings", encoder_settings)
    from rapidscore.cli import build_parser

    parser = build_parser()
    for argv, model, baseline in (
            (["--rescale_with_baseline"], DEFAULT_MODEL, ("en", DEFAULT_MODEL)),
            (["--rescale_with_baseline", "-m", "all-MiniLM-L6-v2"], "all-MiniLM-L6-v2", ("en", "all-MiniLM-L6-v2")),
            (["--rescale_with_baseline", "-m", "all-MiniLM-L6-v2", "--lang", "en"], "all-MiniLM-L6-v2",
             ("en", "all-MiniLM-L6-v2")),
            (["--lang", "en"], "roberta-large", None),  # bert-score's choice for --lang alone
            ([], DEFAULT_MODEL, None)):
        args = parser.parse_args(["bertscore", "-c", "a", "-r", "b", *argv])
        seen.clear()
        with pytest.raises(SystemExit):
            bertscore_cli._scorer(args)
        assert seen == {"model": model, **({"baseline": baseline} if baseline else {})}, argv


def test_cli_rescale_of_another_model_still_needs_lang(tiny_bert, capsys) -> None:
    assert main(["bertscore", "-c", "a cat", "-r", "a dog", "-m", tiny_bert, "--rescale_with_baseline", "-q"]) == 2
    assert "needs lang" in error_line(capsys)


# ---- 4. SELECT's release layout --------------------------------------------------------------------
def _write_results(folder, model, technique, concepts, composed=False) -> None:
    """SELECT's results files of one (model, technique): ``{seed: {concept: {id: record}}}``
    (compositions: ``{seed: {relation: {concept: ...}}}``), two records per concept, one refused."""
    for eval_type in ("abstention", "generalization", "specificity"):
        os.makedirs(folder / model / eval_type, exist_ok=True)
        seed: dict = {}
        target = seed.setdefault("and", {}) if composed else seed
        for concept in concepts:
            target[concept] = {f"{concept}-{i}": {"id": f"{concept}-{i}", "concept": concept.split("#"),
                                                  "query": f"Question {i} about {concept}?",
                                                  "response": "I cannot help with that." if i else "Sure: here.",
                                                  "refusal": {"heuristic": bool(i)}} for i in range(2)}
        with gzip.open(folder / model / eval_type / f"{technique}.json.gz", "wt", encoding="utf-8") as handle:
            json.dump({"0": seed}, handle)


@pytest.fixture
def select_layout(tmp_path) -> Path:
    """SELECT's release as published: data/SELECT/{atoms,compositions}/ beside results/; the atomic
    results use instances (yago:...) that only taxonomy_plus.json has; the API model ran prompting
    only (two of its cells have no results file)."""
    atoms = tmp_path / "data" / "SELECT" / "atoms"
    compositions = tmp_path / "data" / "SELECT" / "compositions"
    atoms.mkdir(parents=True)
    compositions.mkdir(parents=True)
    base = {"schema:Product": {"name": "Products", "children": {"schema:Book": {"name": "Books", "children": {}}}}}
    plus = {"schema:Product": {"name": "Products", "children": {"schema:Book": {"name": "Books", "children": {
        "yago:Dune": {"name": "Dune", "children": {}}}}}}}
    (atoms / "taxonomy.json").write_text(json.dumps(base))
    (atoms / "taxonomy_plus.json").write_text(json.dumps(plus))
    (compositions / "taxonomy_plus.json").write_text(json.dumps(
        {"and": {"schema:Book#schema:Product": {"name": "Books and products", "children": {}}}}))
    concepts = ["schema:Product", "schema:Book", "yago:Dune"]
    atomic = tmp_path / "results" / "expr.abstain.select"
    composed = tmp_path / "results" / "expr.abstain.select.compose"
    for model, techniques in (("google--gemma-2-2b-it", ("prompt-simple", "tuning-sft", "steering-repe")),
                              ("openai--azure--gpt-4o", ("prompt-simple",))):
        for technique in techniques:
            _write_results(atomic, model, technique, concepts)
            _write_results(composed, model, technique, ["schema:Book#schema:Product"], composed=True)
    return tmp_path


def test_taxonomies_are_found_in_selects_release_layout(select_layout) -> None:
    experiments = {e.name: e for e in find_experiments(select_layout)}
    atoms = select_layout / "data" / "SELECT" / "atoms"
    assert experiments["results/expr.abstain.select"].taxonomy == str(atoms / "taxonomy_plus.json")
    assert experiments["results/expr.abstain.select.compose"].taxonomy == str(
        select_layout / "data" / "SELECT" / "compositions" / "taxonomy_plus.json")
    # taxonomy.json when there is no taxonomy_plus.json; nearest first: the experiment's own folder
    (atoms / "taxonomy_plus.json").unlink()
    assert find_taxonomy(str(select_layout / "results" / "expr.abstain.select"), str(select_layout)) == str(
        atoms / "taxonomy.json")
    own = select_layout / "results" / "expr.abstain.select" / "taxonomy.json"
    own.write_text("{}")
    assert find_taxonomy(str(own.parent), str(select_layout)) == str(own)


def test_abstention_command_on_the_release_layout_names_the_missing_cells(select_layout, capsys) -> None:
    assert main(["abstention", str(select_layout), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "taxonomy none found" not in captured.err
    assert "data/SELECT/atoms/taxonomy_plus.json" in captured.err.replace(os.sep, "/")
    assert "GPT-4o (Azure)" in captured.out and "Gemma-2-2B-IT" in captured.out
    note = ("- (no results file): 2 of 6 cells (model x technique): GPT-4o (Azure): Act. Steering, SFT")
    assert note in captured.out
    assert captured.out.count(note) == 2  # once per experiment, after its tables
    # JSON: how many and which, folder names and display names
    assert main(["abstention", str(select_layout), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for experiment in doc["experiments"]:
        assert experiment["cells"] == 6
        assert experiment["missing_cells"] == [
            {"model": "openai--azure--gpt-4o", "technique": "steering-repe", "model_name": "GPT-4o (Azure)",
             "technique_name": "Act. Steering"},
            {"model": "openai--azure--gpt-4o", "technique": "tuning-sft", "model_name": "GPT-4o (Azure)",
             "technique_name": "SFT"}]
    row = next(r for r in doc["rows"] if r["model"] == "openai--azure--gpt-4o")
    assert row["model_name"] == "GPT-4o (Azure)"
    # the base taxonomy, given explicitly, still lacks the instances (as SELECT's data guide says)
    base = str(select_layout / "data" / "SELECT" / "atoms" / "taxonomy.json")
    assert main(["abstention", str(select_layout / "results" / "expr.abstain.select"), "--taxonomy", base,
                 "-q"]) == 2
    assert "yago:Dune" in error_line(capsys)


def test_no_taxonomy_note_says_where_it_looked(tmp_path, capsys) -> None:
    _write_results(tmp_path / "a" / "expr", "m", "t", ["c1", "c2"])
    _write_results(tmp_path / "a" / "expr2", "m", "t", ["c1", "c2"])
    assert main(["abstention", str(tmp_path / "a"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "taxonomy none found (looked for taxonomy_plus.json, taxonomy.json" in err
    assert "data/SELECT/atoms/" in err and "--taxonomy" in err


def test_missing_note_is_empty_when_every_cell_has_results() -> None:
    from rapidscore.abstention.rates import Aggregate

    summary = {("m", "t"): {"abstention": Aggregate(0.5, 0.1, 3)}}
    assert missing_note(summary) == ""


# ---- 5. display names -----------------------------------------------------------------------------
# SELECT's release (results/expr.abstain.select/*) and other real hub names
SELECT_MODELS = {
    "google--gemma-2-2b-it": "Gemma-2-2B-IT",
    "google--gemma-2-9b-it": "Gemma-2-9B-IT",
    "meta-llama--meta-llama-3.1-8b-instruct": "Llama-3.1-8B-Instruct",
    "mistralai--mistral-7b-instruct-v0.3": "Mistral-7B-Instruct-v0.3",
    "openai--azure--gpt-3.5-turbo": "GPT-3.5 Turbo (Azure)",
    "openai--azure--gpt-4o": "GPT-4o (Azure)",
}
OTHER_MODELS = {
    "meta-llama--Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct",
    "meta-llama--Meta-Llama-3-8B-Instruct": "Llama-3-8B-Instruct",
    "meta-llama--Llama-2-7b-chat-hf": "Llama-2-7B-Chat",
    "mistralai--Mistral-7B-Instruct-v0.3": "Mistral-7B-Instruct-v0.3",
    "mistralai--Mixtral-8x7B-Instruct-v0.1": "Mixtral-8x7B-Instruct-v0.1",
    "Qwen--Qwen2.5-7B-Instruct": "Qwen2.5-7B-Instruct",
    "qwen--qwen2.5-0.5b-instruct": "Qwen2.5-0.5B-Instruct",
    "anthropic--claude-3-5-sonnet": "Claude 3.5 Sonnet",
    "anthropic--claude-3-5-sonnet-20240620": "Claude 3.5 Sonnet (2024-06-20)",
    "google--gemini-1.5-pro": "Gemini 1.5 Pro",
    "openai--gpt-4o": "GPT-4o",
    "openai--gpt-4o-mini": "GPT-4o mini",
    "azure--gpt-35-turbo": "GPT-3.5 Turbo (Azure)",
    "openai--o3-mini": "o3-mini",
    "microsoft--Phi-3.5-mini-instruct": "Phi-3.5-mini-Instruct",
    "facebook--opt-350m": "OPT-350M",
}
UNKNOWN_MODELS = {
    "acme--foo-13b-chat": "Foo-13B-Chat",  # the maker dropped, the size and "chat" as usual
    "model-a": "Model-a",  # no maker: the first letter capitalised
    "my_model": "My_model",
    "together--acme--bar-7b": "Bar-7B (Together)",  # a hosting platform stays, in parentheses
}


@pytest.mark.parametrize(("folder", "shown"), [*SELECT_MODELS.items(), *OTHER_MODELS.items(),
                                               *UNKNOWN_MODELS.items()])
def test_display_model(folder, shown) -> None:
    assert display_model(folder) == shown


def test_display_techniques_are_selects_short_names() -> None:
    assert [display_technique(t) for t in ("prompt-simple", "prompt_cot-few_shot", "steering-repe",
                                           "tuning-sft", "tuning-sft-dpo")] == [
        "Prompt (ZS)", "Prompt (FS+CoT)", "Act. Steering", "SFT", "SFT + DPO"]
    assert display_technique("prompt-cot") == "Prompt CoT" and display_technique("icl_few-shot") == "ICL few shot"


def test_the_maker_is_shown_only_where_it_disambiguates() -> None:
    labels = model_labels(["meta-llama--Llama-3.1-8B-Instruct", "unsloth--Llama-3.1-8B-Instruct",
                           "openai--gpt-4o", "openai--azure--gpt-4o"])
    assert labels == {"meta-llama--Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct (meta-llama)",
                      "unsloth--Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct (unsloth)",
                      "openai--gpt-4o": "GPT-4o", "openai--azure--gpt-4o": "GPT-4o (Azure)"}
    assert Names(derive=False).model_labels(["openai--gpt-4o"]) == {"openai--gpt-4o": "openai--gpt-4o"}
    assert Names({"openai--gpt-4o": "GPT-4o (OpenAI)"}).model_labels(["openai--gpt-4o"]) == {
        "openai--gpt-4o": "GPT-4o (OpenAI)"}


# ---- 6. NRR's per-item rows -------------------------------------------------------------------------
def test_nrr_table_and_rejected_list(tmp_path, tiny_bert, capsys) -> None:
    generated = write_lines(tmp_path / "g.txt", ["a cat sat on the mat", "stocks fell", "a cat sat on the mat"])
    references = write_lines(tmp_path / "r.txt", ["a cat sat on the mat"] * 3)
    common = ["nrr", "--model", tiny_bert, "--threshold", "0.999", "--generated", generated, "--references",
              references]
    assert main([*common, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rejected = [i + 1 for i, no in enumerate(doc["rejected"]) if no]
    assert rejected == [2]
    assert main(common) == 0
    out = capsys.readouterr().out
    assert f"rejected answers (similarity): 2 ({doc['similarities'][1]:.3f})" in out
    assert main([*common, "--table"]) == 0
    out = capsys.readouterr().out
    assert "| Answer | Similarity | Rejected |\n|---|---|---|\n" in out
    assert f"| 2 | {doc['similarities'][1]:.3f} | yes |" in out and "| 1 | 1.000 | no |" in out
    # several references: the best one's number (1-based)
    other = write_lines(tmp_path / "r2.txt", ["stocks fell"] * 3)
    assert main([*common, other, "--table"]) == 0
    out = capsys.readouterr().out
    assert "| Answer | Similarity | Rejected | Best reference |" in out and "| 2 | 1.000 | no | 2 |" in out


def test_nrr_and_bertscore_share_the_table_printer() -> None:
    # one implementation: both commands import it from the shared CLI options
    import inspect

    from rapidscore.bertscore import cli as bertscore_cli
    from rapidscore.nrr import cli as nrr_cli

    assert "print_table(" in inspect.getsource(bertscore_cli.run)
    assert "print_table(" in inspect.getsource(nrr_cli)
    assert "|---|" not in inspect.getsource(bertscore_cli) + inspect.getsource(nrr_cli)


def test_many_rejected_answers_are_counted_not_listed(tmp_path, tiny_bert, capsys) -> None:
    generated = write_lines(tmp_path / "g.txt", [f"answer number {i}" for i in range(12)])
    references = write_lines(tmp_path / "r.txt", ["something else entirely"] * 12)
    assert main(["nrr", "--generated", generated, "--references", references, "--model", tiny_bert,
                 "--threshold", "1.0"]) == 0
    assert "rejected answers: 12 (--table lists every answer" in capsys.readouterr().out


# ---- 7. one progress policy -------------------------------------------------------------------------
@pytest.fixture
def command_inputs(tmp_path, tiny_bert) -> dict[str, list[str]]:
    """argv per command: each a tiny input (three pairs, two labels, a four-file results tree)."""
    cands = write_lines(tmp_path / "c.txt", ["a cat sat", "a dog ran", "the sun rose"])
    refs = write_lines(tmp_path / "r.txt", ["a cat sat down", "a dog walked", "the moon set"])
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"response": r, "text": r}) + "\n"
                                 for r in ("I cannot help with that.", "Paris is in France.", "Sorry, no.")))
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": 1, "text": "John works in Paris",
                                "labels": {"John:0:4": "person", "Paris:14:19": "city"}}) + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": 1, "labels": {"John:0:4": "name", "Paris:14:19": "location"}}) + "\n")
    _write_results(tmp_path / "tree" / "expr", "m", "t", ["c1", "c2"])
    return {
        "bertscore": ["bertscore", "-c", cands, "-r", refs, "-m", tiny_bert],
        "nrr": ["nrr", "--generated", cands, "--references", refs, "--model", tiny_bert],
        "ner": ["ner", "--gold", str(gold), "--pred", f"p={pred}", "--label-model", tiny_bert],
        "refusal": ["refusal", "--input", str(responses)],
        "abstention": ["abstention", str(tmp_path / "tree"), "--workers", "1"],
        "rgb": ["rgb", str(responses)],
    }


# the bar each command draws when forced ("rgb" decides all responses at once: nothing to follow)
BARS = {"bertscore": "encoding", "nrr": "encoding", "ner": "encoding", "refusal": "scoring",
        "abstention": "evaluating", "rgb": None}


@pytest.mark.parametrize("command", list(BARS))
def test_no_bar_on_a_captured_stderr_and_a_bar_when_forced(command, command_inputs, capsys) -> None:
    argv = command_inputs[command]
    assert main(argv) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert not BAR.search(err), err  # stderr is not a terminal: no bar text in the log
    assert main([*argv, "--progress"]) == 0
    err = capsys.readouterr().err
    if BARS[command] is not None:
        assert BAR.search(err) and BARS[command] in err, err
    assert main([*argv, "--no-progress"]) == 0
    assert not BAR.search(capsys.readouterr().err)


def test_the_policy_in_one_place(monkeypatch) -> None:
    from rapidscore.common import progress
    from rapidscore.common.cli_options import show_progress
    from rapidscore.common.progress import DELAY_SECONDS, decide, progress_bar

    class Terminal:
        def __init__(self) -> None:
            self.text: list[str] = []

        def isatty(self) -> bool:
            return True

        def write(self, text) -> None:
            self.text.append(text)

        def flush(self) -> None:
            pass

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert decide(None) is True and decide(None, quiet=True) is False and decide(False) is False
    assert decide(None, default=False) is False
    assert progress_bar(range(2)).delay == DELAY_SECONDS == 1.0  # a bar only after a second of work
    for _ in progress_bar(range(3), desc="quick"):
        pass
    assert not any("quick" in text for text in terminal.text)  # under a second: never drawn
    assert decide(True) is True and progress_bar(range(2)).delay == 0  # --progress: at once
    monkeypatch.setattr(sys, "stderr", Terminal())
    sys.stderr.isatty = lambda: False  # type: ignore[method-assign]
    assert decide(None) is False
    # every command's parser has the same default: the commands' show_progress goes through decide
    from rapidscore.cli import build_parser

    parser = build_parser()
    required = {"ner": ["--gold", "g"], "refusal": ["--input", "x"], "abstention": ["x"], "rgb": ["x"]}
    for command in BARS:
        args = parser.parse_args([command, *required.get(command, [])])
        assert args.progress is None and args.progress_default is True, command
        assert show_progress(args) is False  # not a terminal
    progress.decide(None)  # leave the policy as a run without --progress does

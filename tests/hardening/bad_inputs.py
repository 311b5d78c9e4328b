"""The bad-input corpus of issue 16: one row per reproducer, run by test_bad_inputs.py.

API rows: ``(id, call, exception type, message fragment)``; ``call(files)`` gets the
:class:`BadFiles` paths. A row whose exception is None expects a result, checked by the call
itself (an ``assert`` inside it). CLI rows: ``(id, argv, message fragment)``; every one must exit
with status 2 and print ``rapidscore COMMAND: error: ...`` holding the fragment, never a
traceback. ``{name}`` in an argv is replaced by the path of that file of :class:`BadFiles`.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NAN = float("nan")


@dataclass
class BadFiles:
    """Files the rows read; made once per test session (see test_bad_inputs.py)."""

    root: Path

    def make(self) -> BadFiles:
        r = self.root
        (r / "c.txt").write_text("a cat sat\nthe dog ran\n", encoding="utf-8")
        (r / "r.txt").write_text("a cat sits\na dog runs\n", encoding="utf-8")
        (r / "latin1.txt").write_bytes("ok line\ncaf\xe9 cr\xe8me\n".encode("latin-1"))
        (r / "latin1_rows.jsonl").write_bytes(b'{"text": "fine"}\n{"text": "\xd8\xff"}\n')
        (r / "empty_gold.jsonl").write_text("", encoding="utf-8")
        (r / "empty_pred.jsonl").write_text("", encoding="utf-8")
        (r / "a_directory").mkdir(exist_ok=True)
        (r / "plot_file.png").write_bytes(b"not a directory")
        record = {"seed1": {"concept": {"1": {"response": "I cannot answer that."}}}}
        whole = gzip.compress(json.dumps(record).encode())
        for tree, files in (("truncated_tree", {"t": whole[: len(whole) // 2]}),
                            ("mixed_tree", {"t": whole[: len(whole) // 2], "u": whole})):
            folder = r / tree / "model" / "abstention"
            folder.mkdir(parents=True, exist_ok=True)
            for name, data in files.items():
                (folder / f"{name}.json.gz").write_bytes(data)
        good = r / "good_tree" / "model" / "abstention"
        good.mkdir(parents=True, exist_ok=True)
        (good / "t.json.gz").write_bytes(whole)
        (r / "deep_taxonomy.json").write_text('{"a": ' * 5000 + "{}" + "}" * 5000, encoding="utf-8")
        (r / "truncated.jsonl").write_text('{"id": 1, "text": "ab", "labels": {}}\n{"id": 2, "te', encoding="utf-8")
        (r / "surrogate.jsonl").write_text(
            json.dumps({"model": "m", "technique": "t", "eval_type": "abstention", "seed": "s", "concept": "c",
                        "question": "q", "response": "\ud800 I cannot"}) + "\n", encoding="utf-8")
        (r / "surrogate_table.jsonl").write_text(json.dumps(
            {"model": "m", "technique": "t", "eval_type": "abstention", "seed": "s", "concept": "c", "question": "q",
             "response": "\ud800 I cannot help with that"}) + "\n", encoding="utf-8")
        (r / "latin1_ner.jsonl").write_bytes(b'{"id": 1, "text": "ab", "labels": {}}\n{"id": 2, "text": "\xd8"}\n')
        (r / "latin1_baseline.tsv").write_bytes(b"LAYER,P,R,F\n0,0.5,0.5,0.5\xe9\n")
        (r / "nan_baseline.tsv").write_text("LAYER,P,R,F\n0,0.5,nan,0.5\n", encoding="utf-8")
        (r / "inf_baseline.tsv").write_text("LAYER,P,R,F\n0,0.5,0.5,inf\n", encoding="utf-8")
        (r / "one_baseline.tsv").write_text("LAYER,P,R,F\n0,0.5,1.0,0.5\n", encoding="utf-8")
        # issue 29 item 16
        (r / "binary.idf").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
        (r / "deep_rows.jsonl").write_text('{"candidate": ' * 5000 + '"a"' + "}" * 5000 + "\n", encoding="utf-8")
        (r / "no_pyarrow.parquet").write_bytes(b"PAR1 not read: pyarrow is missing")
        for rows in (1, 3):
            (r / f"rows{rows}_baseline.tsv").write_text(
                "LAYER,P,R,F\n" + "".join(f"{k},0.5,0.5,0.5\n" for k in range(rows)), encoding="utf-8")
        return self

    def __getattr__(self, name: str) -> str:
        for candidate in self.root.iterdir():
            if candidate.stem == name or candidate.name == name:
                return str(candidate)
        raise AttributeError(name)


def _core_greedy_3000_threads(f):
    from rapidscore import _core

    o = np.arange(5)
    return _core.matching.greedy_match(np.ones((4, 4), "f"), o, np.ones(4, "f"), np.stack([o[:-1]] * 2, 1), 3000)


def _ner(gold_labels, pred_labels=None, **options):
    import rapidscore.ner as ner

    gold = [{"id": 1, "text": "Paris is big", "labels": gold_labels}]
    pred = [{"id": 1, "text": "Paris is big", "labels": pred_labels or {"Paris:0:5": "LOC"}}]
    return ner.evaluate(gold, pred, label_similarity="exact", **options)


def _expect_refusals(texts, expected):
    from rapidscore.abstention import detect_refusal

    got = detect_refusal(texts).tolist()
    assert got == expected, got
    return got


def _bertscore(**options):
    from rapidscore.bertscore import BERTScore

    return BERTScore(**options)


def _baseline(path, **options):
    return _bertscore(rescale_with_baseline=True, baseline_path=path, **options)


def _records(eval_type="abstention"):
    from rapidscore.abstention import Record

    return [Record("m", "t", eval_type, "s", "c", "I cannot")]


# (id, call, exception type or None, message fragment)
API_CASES = [
    # 1. thread pool / thread counts at the native entry points
    ("core-greedy-3000-threads", _core_greedy_3000_threads, ValueError, "num_threads must be in [0, 1024]"),
    ("core-greedy-huge-threads", lambda f: __import__("rapidscore")._core.matching.greedy_match(
        np.ones((1, 1), "f"), np.array([0, 1]), np.ones(1, "f"), np.zeros((1, 2), np.int64), 99999999999),
     ValueError, "num_threads must be in [0, 1024]"),
    ("core-align-huge-threads", lambda f: __import__("rapidscore")._core.alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], n_threads=99999999999), ValueError, "n_threads must be <= 1024"),
    ("core-align-bool-threads", lambda f: __import__("rapidscore")._core.alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], n_threads=True), TypeError, "n_threads must be an int"),
    ("ner-3000-threads", lambda f: _ner({"Paris:0:5": "LOC"}, num_threads=3000), ValueError,
     "num_threads must be in [1, 1024]"),
    # 3. thread caps of the public objects
    ("bertscore-1e6-threads", lambda f: _bertscore(num_threads=10**6), ValueError, "num_threads must be in [1, 1024]"),
    ("encoder-1e5-threads", lambda f: __import__("rapidscore").get_encoder(num_threads=100000), ValueError,
     "num_threads must be in [1, 1024]"),
    ("matching-1e5-threads", lambda f: __import__("rapidscore.kernels.matching").kernels.matching.greedy_match(
        np.ones((1, 1), "f"), [0, 1], np.ones(1, "f"), [[0, 0]], num_threads=100000), ValueError,
     "num_threads must be in [1, 1024]"),
    # 4. baselines
    ("baseline-nan", lambda f: _baseline(f.nan_baseline, layer=0), ValueError, "line 2: R = nan"),
    ("baseline-inf", lambda f: _baseline(f.inf_baseline, layer=0), ValueError, "line 2: F = inf"),
    ("baseline-one", lambda f: _baseline(f.one_baseline, layer=0), ValueError, "finite number below 1"),
    ("baseline-1-row-all-layers", lambda f: _baseline(f.rows1_baseline, all_layers=True), ValueError,
     "has 1 layer rows; all_layers=True needs one per hidden state"),
    ("baseline-3-rows-all-layers", lambda f: _baseline(f.rows3_baseline, all_layers=True), ValueError,
     "has 3 layer rows; all_layers=True needs one per hidden state"),
    # 5. abstention / nrr arguments
    ("select-phrases-str", lambda f: __import__("rapidscore.abstention").abstention.SelectDetector(
        "keyword", phrases="refuse"), TypeError, "phrases must be a list of strings, got one str 'refuse'"),
    ("phrase-detector-str", lambda f: __import__("rapidscore.abstention").abstention.PhraseDetector("refuse"),
     TypeError, "phrases and regexes must be lists"),
    ("embedding-threshold-nan", lambda f: __import__("rapidscore.abstention").abstention.EmbeddingDetector(
        threshold=NAN), ValueError, "threshold must be a cosine similarity in [-1, 1], got nan"),
    ("embedding-threshold-2", lambda f: __import__("rapidscore.abstention").abstention.EmbeddingDetector(
        threshold=2), ValueError, "threshold must be a cosine similarity in [-1, 1], got 2"),
    ("phrase-first-chars-negative", lambda f: __import__("rapidscore.abstention").abstention.PhraseDetector(
        ["sorry"], first_chars=-1), ValueError, "first_chars must be a positive int or None, got -1"),
    ("calibrate-nan", lambda f: __import__("rapidscore.nrr").nrr.calibrate_threshold([0.1, NAN], [True, False]),
     ValueError, "similarities[1] is nan"),
    ("nrr-curve-nan-threshold", lambda f: __import__("rapidscore.nrr").nrr.nrr_curve([0.5], [NAN]), ValueError,
     "thresholds[0] is NaN"),
    ("summarize-nan", lambda f: __import__("rapidscore.abstention").abstention.summarize(_records(), [NAN]),
     ValueError, "refused[0] = nan is not a decision"),
    ("summarize-unknown-eval-type", lambda f: __import__("rapidscore.abstention").abstention.summarize(
        _records("abstension"), [True]), ValueError, "eval_type 'abstension' is not one of"),
    # 6. NER
    ("ner-no-records", lambda f: __import__("rapidscore.ner").ner.evaluate([], [], label_similarity="exact"),
     ValueError, "gold holds no records"),
    ("ner-float-span", lambda f: __import__("rapidscore.ner").ner.align_spans([(0.5, 3)], [(0, 3)]), TypeError,
     "record 0, span 0: start must be an integer character offset, got float: 0.5"),
    ("core-align-float-span", lambda f: __import__("rapidscore")._core.alignment.align_spans_batch(
        [0, 1], [0.5], [3], [0, 1], [0], [3]), TypeError, "gold_starts must hold integers"),
    ("ner-trim-no", lambda f: _ner({"Paris:0:5": "LOC"}, trim="no"), TypeError, "trim must be True or False"),
    # 7. encoder inputs
    ("encoder-dict", lambda f: __import__("rapidscore").get_encoder().token_embeddings({"x": 1}), TypeError,
     "texts must be a list of strings, got dict"),
    ("encoder-set", lambda f: __import__("rapidscore").get_encoder().token_embeddings({"x"}), TypeError,
     "texts must be a list of strings, got set"),
    # 9. lone surrogates: a result for the refusal detector, a positioned error where text is encoded
    ("refusal-surrogate", lambda f: _expect_refusals(["\ud800 I cannot help with that", "hello \ud800"],
                                                     [True, False]), None, ""),
    ("encoder-surrogate", lambda f: __import__("rapidscore").get_encoder().token_embeddings(["ok", "b\ud800"]),
     ValueError, "texts[1] holds a lone surrogate '\\ud800' at position 1"),
    ("bertscore-surrogate", lambda f: _bertscore().score(["a"], ["b\ud800"]), ValueError,
     "refs[0][0] holds a lone surrogate"),
    ("nrr-surrogate", lambda f: __import__("rapidscore.nrr").nrr.negative_rejection(["a\ud800"], ["b"]),
     ValueError, "generated[0] holds a lone surrogate"),
    # 11. messages
    ("bertscore-empty", lambda f: _expect_empty(_bertscore().score([], [])), None, ""),
    ("nrr-empty", lambda f: __import__("rapidscore.nrr").nrr.similarity([], []), ValueError,
     "nothing to evaluate: generated is empty"),
    ("bertscore-bytes", lambda f: _bertscore().score(b"abc", ["abc"]), TypeError,
     "cands must be a list of strings, got bytes"),
    ("encoder-max-length", lambda f: __import__("rapidscore.encoder").encoder.Encoder(max_length=100000),
     ValueError, "max_length=100000 exceeds the 512 positions"),
    ("ner-seed-label-none", lambda f: _ner({"Paris:0:5": None}), ValueError,
     "seed entity 'Paris:0:5': label must be a non-empty string, got NoneType"),
    ("ner-seed-label-5", lambda f: _ner({"Paris:0:5": 5}), ValueError,
     "seed entity 'Paris:0:5': label must be a non-empty string, got int: 5"),
    ("nrr-similarity-model-x", lambda f: __import__("rapidscore.nrr").nrr.negative_rejection(
        ["a"], ["b"], similarity_model="x"), TypeError, "similarity_model must be a SentenceSimilarity"),
    ("read-texts-latin1", lambda f: __import__("rapidscore.common.io").common.io.read_texts(f.latin1), ValueError,
     "latin1.txt:2: not valid UTF-8 text: byte 0xe9"),
    ("read-jsonl-latin1", lambda f: __import__("rapidscore.common.io").common.io.read_texts(f.latin1_rows, "text"),
     ValueError, "latin1_rows.jsonl:2: not valid UTF-8 text: byte 0xd8"),
    ("ner-truncated-jsonl", lambda f: __import__("rapidscore.ner.records").ner.records.read_jsonl(f.truncated),
     ValueError, "truncated.jsonl:2: not valid JSON"),
    ("taxonomy-latin1", lambda f: __import__("rapidscore.abstention").abstention.Taxonomy.load(f.latin1_rows),
     ValueError, "latin1_rows.jsonl:2: not valid UTF-8"),
    ("taxonomy-too-deep", lambda f: __import__("rapidscore.abstention").abstention.Taxonomy.load(f.deep_taxonomy),
     ValueError, "deep_taxonomy.json: "),
    ("make-baseline-zero-pairs", lambda f: __import__("rapidscore.bertscore").bertscore.compute_baseline(
        ["a", "b"], n_pairs=0), ValueError, "n_pairs must be a positive int, got 0"),
    # 8. truncated .gz: fails clearly by default, skipped (and counted) with on_error="skip"
    ("results-truncated-gz", lambda f: __import__("rapidscore.abstention").abstention.load_results_tree(
        f.truncated_tree), ValueError, "t.json.gz:1: cannot read the compressed data"),
    ("results-truncated-gz-skip", lambda f: _skip_truncated(f), None, ""),
    # 12. alignment work is bounded: a clear limit for overlapping spans, linear time for flat ones
    ("align-4000-overlapping", lambda f: _align_overlapping(4000), ValueError,
     "record 0: a cluster of 4000 gold x 4000 predicted overlapping spans needs the assignment solver"),
    ("align-200000-flat", lambda f: _align_flat(200_000), None, ""),
    # issue 29 item 5: no NaN result from finite but huge embeddings, nor from a label embedder's inf
    ("core-greedy-1e30-embeddings", lambda f: _core().matching.greedy_match(
        np.full((2, 4), 1e30, "f"), np.array([0, 1, 2]), np.ones(2, "f"), np.array([[0, 1]])), ValueError,
     "embeddings row 0 has L2 norm 2e+30: its dot products overflow float32"),
    ("core-pairwise-1e30-embeddings", lambda f: _core().matching.pairwise_match(
        np.full((2, 4), 1e30, "f"), np.array([0, 1, 2]), np.ones(2, "f"), np.array([0]), np.array([1])), ValueError,
     "embeddings row 0 has L2 norm 2e+30"),
    ("ner-embedder-inf", lambda f: _ner_embedded(np.inf), ValueError,
     "label embedder returned a non-finite vector (NaN or inf) for label 'loc'"),
    ("ner-embedder-nan", lambda f: _ner_embedded(NAN), ValueError, "label embedder returned a non-finite vector"),
    ("ner-embedder-1e200", lambda f: _expect_dmberta_f1(_ner_embedded(1e200), 1.0), None, ""),
    # issue 29 item 9: offsets beyond int64 were a bare OverflowError (HTTP 500)
    ("ner-offset-2**70", lambda f: _ner([[0, 2**70, "LOC"]]), ValueError,
     "record 1: entity [0, 1180591620717411303424, 'LOC'] has an offset beyond the largest supported"),
    ("ner-seed-offset-2**63", lambda f: _ner({f"Paris:0:{2**63}": "LOC"}), ValueError,
     "offset beyond the largest supported character offset (4611686018427387903 = 2**62 - 1)"),
    ("ner-score-10**400", lambda f: _ner([[0, 5, "LOC", 10**400]]), ValueError, "entity score must be a number"),
    ("nrr-pairs-embed-inf", lambda f: _similarity().pairs(["a"], ["b"], embed=lambda texts: np.full(
        (len(texts), 3), np.inf)), ValueError, "sentence vector 0 holds a non-finite value (NaN or inf)"),
    ("nrr-rejection-embed-nan", lambda f: _similarity().rejection(["a"], ["b"], 0.5, embed=lambda texts: np.full(
        (len(texts), 3), NAN)), ValueError, "sentence vector 0 holds a non-finite value (NaN or inf)"),
    # issue 29 item 16: wrong types into _core are a TypeError naming the argument, not pybind11's
    # "incompatible function arguments" signature dump
    ("core-align-scheme-int", lambda f: _core().alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], scheme=5), TypeError, "scheme must be a str, got int: 5"),
    ("core-align-method-none", lambda f: _core().alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], method=None), TypeError, "method must be a str, got NoneType"),
    ("core-align-min-jaccard-str", lambda f: _core().alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], min_jaccard="0.5"), TypeError, "min_jaccard must be a number, got str"),
    ("core-align-min-overlap-bool", lambda f: _core().alignment.align_spans_batch(
        [0, 1], [0], [3], [0, 1], [0], [3], min_overlap_percent=True), TypeError,
     "min_overlap_percent must be a number, got bool"),
    ("core-phrases-str", lambda f: _core().phrases.FuzzyPhraseMatcher("sorry", [5], 0.9), TypeError,
     "processed_phrases must be a list of str, got str"),
    ("core-phrases-item-int", lambda f: _core().phrases.FuzzyPhraseMatcher(["sorry", 5], [5, 1], 0.9), TypeError,
     "processed_phrases[1] must be a str, got int: 5"),
    ("core-phrases-negative-length", lambda f: _core().phrases.FuzzyPhraseMatcher(["sorry"], [-1], 0.9),
     ValueError, "raw_lengths[0] must be an int >= 0, got -1"),
    ("core-phrases-threshold-str", lambda f: _core().phrases.FuzzyPhraseMatcher(["sorry"], [5], "0.9"), TypeError,
     "threshold must be a number, got str: '0.9'"),
    ("core-phrases-match-tuple", lambda f: _core().phrases.FuzzyPhraseMatcher(["sorry"], [5], 0.9).match(
        ("i am sorry",)), TypeError, "texts must be a list of str, got tuple"),
    ("core-phrases-process-bytes", lambda f: _core().phrases.default_process_ascii(b"abc"), TypeError,
     "text must be a str, got bytes"),
    ("core-phrases-contractions-none", lambda f: _core().phrases.expand_contractions_ascii(None), TypeError,
     "text must be a str, got NoneType"),
    # issue 29 item 4: SentenceSimilarity.pairs / .rejection check their inputs as negative_rejection
    ("nrr-pairs-flat-references", lambda f: _expect_flat_references_as_groups(), None, ""),
    ("nrr-pairs-fewer-groups", lambda f: _similarity().pairs(["a", "b"], [["a"]]), ValueError,
     "Different number of generated answers and references: 2 != 1"),
    ("nrr-pairs-empty-group", lambda f: _similarity().pairs(["a"], [[]]), ValueError,
     "references[0] is an empty list of references"),
    ("nrr-rejection-fewer-groups", lambda f: _similarity().rejection(["a", "b"], [["a"]], 0.5), ValueError,
     "Different number of generated answers and references: 2 != 1"),
    ("nrr-rejection-empty-group", lambda f: _similarity().rejection(["a"], [[]], 0.5), ValueError,
     "references[0] is an empty list of references"),
    ("nrr-rejection-threshold-nan", lambda f: _similarity().rejection(["a"], ["a"], NAN), TypeError,
     "threshold must be a number in [-1, 1], got nan"),
    ("nrr-rejection-threshold-none", lambda f: _similarity().rejection(["a"], ["a"], None), TypeError,
     "threshold must be a number in [-1, 1], got None"),
    ("nrr-rejection-threshold-inf", lambda f: _similarity().rejection(["a"], ["a"], float("inf")), ValueError,
     "threshold must be in [-1, 1] (a cosine similarity), got inf"),
    ("nrr-rejection-threshold-minus-5", lambda f: _similarity().rejection(["a"], ["a"], -5), ValueError,
     "threshold must be in [-1, 1] (a cosine similarity), got -5"),
    # issue 29 item 6: settings that were accepted silently
    ("bertscore-score-iter-memory-budget-0", lambda f: _bertscore().score_iter([("a", "b")], memory_budget=0),
     ValueError, "memory_budget must be a positive int, got 0"),
    ("bertscore-score-iter-memory-budget-minus-1", lambda f: _bertscore().score_iter(
        [("a", "b")], memory_budget=-1), ValueError, "memory_budget must be a positive int, got -1"),
    ("bertscore-chunk-results-memory-budget-0", lambda f: next(__import__(
        "rapidscore.bertscore.streaming").bertscore.streaming.chunk_results(_bertscore(), [("a", "b")],
                                                                         memory_budget=0)), ValueError,
     "memory_budget must be a positive int, got 0"),
    ("nrr-max-length-0", lambda f: __import__("rapidscore.nrr").nrr.SentenceSimilarity(max_length=0), ValueError,
     "max_length must be a positive int, got 0"),
    ("bert-score-device-gpu", lambda f: __import__("rapidscore.bert_score").bert_score.score(
        ["a"], ["b"], lang="en", device="gpu"), ValueError, "got 'gpu'; the GPU is 'cuda' (or 'cuda:0')"),
    ("bert-score-device-mps", lambda f: __import__("rapidscore.bert_score").bert_score.score(
        ["a"], ["b"], lang="en", device="mps"), ValueError, "device must be 'cpu' or 'cuda'"),
    ("bert-scorer-device-gpu", lambda f: __import__("rapidscore.bert_score").bert_score.BERTScorer(
        lang="en", device="gpu"), ValueError, "got 'gpu'; the GPU is 'cuda'"),
    ("bert-score-nthreads-str", lambda f: __import__("rapidscore.bert_score").bert_score.score(
        ["a"], ["b"], lang="en", nthreads="4"), ValueError, "nthreads must be a positive int, got '4'"),
    ("bert-scorer-nthreads-0", lambda f: __import__("rapidscore.bert_score").bert_score.BERTScorer(
        lang="en", nthreads=0), ValueError, "nthreads must be a positive int, got 0"),
    # issue 29 item 16: errors that name the argument, file or item
    ("bertscore-score-iter-dict-item", lambda f: list(_bertscore().score_iter([{"candidate": "a", "reference": "b"}])),
     TypeError, "item 0 must be a (candidate, reference) pair, got a dict with keys ['candidate', 'reference']"),
    ("nrr-score-iter-chunk-size-0", lambda f: _similarity().score_iter([("a", "b")], chunk_size=0), ValueError,
     "chunk_size must be a positive int, got 0"),
    ("bertscore-idf-dict-nan", lambda f: _bertscore(idf={101: NAN}), ValueError,
     "idf dict: the weight of token id 101 must be a finite number, got float: nan"),
    ("bertscore-idf-dict-none", lambda f: _bertscore(idf={101: None}), ValueError,
     "idf dict: the weight of token id 101 must be a finite number, got NoneType: None"),
    ("bertscore-idf-dict-str-key", lambda f: _bertscore(idf={"cat": 1.0}), TypeError,
     "idf dict keys must be int token ids, got str: 'cat'"),
    ("bertscore-score-iter-idf-none", lambda f: list(_bertscore(idf=True).score_iter(
        [("a", "b")], idf=_idf_with(101, None))), ValueError, "the weight of token id 101 must be a finite number"),
    ("bertscore-score-iter-idf-str", lambda f: list(_bertscore(idf=True).score_iter(
        [("a", "b")], idf=_idf_with(101, "2.5"))), ValueError,
     "the weight of token id 101 must be a finite number, got str: '2.5'"),
    ("bertscore-score-iter-idf-beyond-float32", lambda f: list(_bertscore(idf=True).score_iter(
        [("a", "b")], idf=_idf_with(101, 1e300))), ValueError, "the weight of token id 101 is 1e+300, beyond float32"),
    ("bertscore-score-iter-idf-binary-file", lambda f: list(_bertscore(idf=True).score_iter(
        [("a", "b")], idf=f.binary)), ValueError, "binary.idf: not an idf file: byte 0x89 at offset 0"),
    ("bertscore-layer-nan", lambda f: _bertscore(layer=NAN), TypeError,
     "layer must be an int (a hidden-state index) or None, got float: nan"),
    ("bertscore-model-5", lambda f: _bertscore(model=5), TypeError,
     "model must be a hub id or a directory path (str or os.PathLike), got int: 5"),
    ("ner-numpy-records", lambda f: _expect_dmberta_f1(_ner_numpy(3), 1.0), None, ""),
    ("ner-numpy-2d", lambda f: _ner_numpy(3, ndim=2), TypeError,
     "gold must be a list of records or of per-record entities, got a 2-D numpy array"),
    ("select-file-directory", lambda f: __import__("rapidscore.abstention").abstention.load_select_file(
        f.a_directory), IsADirectoryError, "is a directory; load_select_file reads one results file"),
    ("select-file-root-path", lambda f: __import__("rapidscore.abstention").abstention.load_select_file(
        "/t.json", eval_type="abstention"), ValueError, "the path does not hold {model}/{eval_type}/{technique}"),
    ("results-tree-a-file", lambda f: __import__("rapidscore.abstention").abstention.load_results_tree(f.c),
     NotADirectoryError, "c.txt' is not a directory"),
    ("results-tree-eval-types-str", lambda f: __import__("rapidscore.abstention").abstention.load_results_tree(
        f.good_tree, eval_types="abstention"), TypeError,
     "eval_types must be a list of names, got one str 'abstention'; use ['abstention']"),
    ("results-tree-eval-types-unknown", lambda f: __import__("rapidscore.abstention").abstention.load_results_tree(
        f.good_tree, eval_types=["abstension"]), ValueError, "eval_types: 'abstension' is not one of abstention"),
    ("results-tree-models-str", lambda f: __import__("rapidscore.abstention").abstention.load_results_tree(
        f.good_tree, models="model"), TypeError, "models must be a list of names, got one str 'model'"),
    ("find-experiments-eval-types-str", lambda f: __import__("rapidscore.abstention").abstention.find_experiments(
        f.good_tree, eval_types="abstention"), TypeError, "eval_types must be a list of names, got one str"),
    ("results-tree-eval-types-list", lambda f: _expect_records(__import__(
        "rapidscore.abstention").abstention.load_results_tree(f.good_tree, eval_types=["abstention"]), 1), None, ""),
    ("read-texts-deep-jsonl", lambda f: __import__("rapidscore.common.io").common.io.read_texts(
        f.deep_rows, "candidate"), ValueError, "deep_rows.jsonl:1: JSON nested too deeply to read"),
    ("flat-table-deep-jsonl", lambda f: __import__("rapidscore.abstention").abstention.load_flat_table(
        f.deep_rows), ValueError, "deep_rows.jsonl: line 1: invalid JSON: JSON nested too deeply to read"),
    ("read-texts-parquet-without-pyarrow", lambda f: _without_pyarrow(lambda: __import__(
        "rapidscore.common.io").common.io.read_texts(f.no_pyarrow, "text")), ImportError,
     "no_pyarrow.parquet: Parquet files need pyarrow (pip install pyarrow)"),
    # issue 29 item 16: the streaming reader and writer name the file too (they said "needs pyarrow" only)
    ("stream-rows-parquet-without-pyarrow", lambda f: _without_pyarrow(lambda: list(__import__(
        "rapidscore.common.stream_io").common.stream_io.iter_rows(f.no_pyarrow, "parquet"))), ImportError,
     "no_pyarrow.parquet: Parquet files need pyarrow (pip install pyarrow)"),
    ("stream-writer-parquet-without-pyarrow", lambda f: _without_pyarrow(lambda: __import__(
        "rapidscore.common.stream_io").common.stream_io.StreamWriter(f.no_pyarrow + ".out.parquet", "parquet", ["f1"],
                                                                      {}, resume=False)), ImportError,
     "no_pyarrow.parquet.out.parquet: Parquet files need pyarrow"),
]


def _similarity():
    """The default SentenceSimilarity (one per process: rows only need a loaded model)."""
    from rapidscore.nrr import SentenceSimilarity

    global _SIMILARITY
    if _SIMILARITY is None:
        _SIMILARITY = SentenceSimilarity()
    return _SIMILARITY


_SIMILARITY = None


def _expect_flat_references_as_groups():
    """A flat list of references is one reference per answer (it was iterated by characters:
    0.166 instead of 0.857), in pairs and in rejection."""
    model = _similarity()
    generated, reference = ["a cat sat on the mat"], "a cat sat on a mat"
    flat, nested = model.pairs(generated, [reference]), model.pairs(generated, [[reference]])
    assert flat[0].tolist() == nested[0].tolist() and flat[0][0] > 0.9, (flat, nested)
    result = model.rejection(generated, [reference], 0.5)
    assert result.similarities.tolist() == nested[0].tolist() and result.n_rejected == 0, result
    return result


def _idf_with(token, weight):
    from collections import defaultdict

    weights = defaultdict(lambda: 1.0)
    weights[token] = weight
    return weights


def _ner_numpy(n, ndim=1):
    import rapidscore.ner as ner

    records = [{"id": i, "text": "Paris is big", "labels": {"Paris:0:5": "LOC"}} for i in range(n)]
    gold = np.empty(n, dtype=object)
    gold[:] = records
    return ner.evaluate(gold if ndim == 1 else gold.reshape(1, n), np.array(records), label_similarity="exact")


def _expect_records(report, n):
    assert len(report.records) == n, report
    return report


def _without_pyarrow(call):
    import sys

    saved = {name: sys.modules.get(name) for name in ("pyarrow", "pyarrow.parquet", "pyarrow.lib")}
    sys.modules.update(dict.fromkeys(saved))  # None: the import fails as if pyarrow were not installed
    try:
        return call()
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module


def _core():
    from rapidscore import _core

    return _core


def _ner_embedded(value):
    """LOC against PLACE with a label embedder returning ``value`` everywhere (identical labels)."""
    import rapidscore.ner as ner

    gold = [{"id": 1, "text": "Paris is big", "labels": {"Paris:0:5": "LOC"}}]
    pred = [{"id": 1, "text": "Paris is big", "labels": {"Paris:0:5": "PLACE"}}]
    return ner.evaluate(gold, pred, embedder=lambda labels: np.full((len(labels), 3), value))


def _expect_dmberta_f1(result, f1):
    assert result.dmberta["f1"] == f1, result.dmberta
    return result


def _expect_empty(result):
    assert result.precision.shape == result.recall.shape == result.f1.shape == (0,), result
    return result


def _skip_truncated(f):
    from rapidscore.abstention import load_results_tree

    report = load_results_tree(f.mixed_tree, on_error="skip")
    assert len(report.records) == 1 and report.skipped == {"unreadable file": 1}, report
    return report


def _align_overlapping(n):
    from rapidscore.ner.alignment import PackedSpans, align_batch

    s = np.arange(n)
    spans = PackedSpans(np.array([0, n]), s, s + n + 1)
    return align_batch(spans, spans, num_threads=1)


def _align_flat(n):
    from rapidscore.ner.alignment import PackedSpans, align_batch

    s = np.arange(n) * 3
    out = align_batch(PackedSpans(np.array([0, n]), s, s + 2), PackedSpans(np.array([0, n]), s + 1, s + 3),
                      num_threads=1)
    # each gold (3k, 3k+2) overlaps only prediction (3k+1, 3k+3): Jaccard 1/3 each
    assert len(out.gold_index) == n and np.allclose(out.jaccard, 1 / 3)
    return out


# (id, argv, message fragment); exit status 2 for all
CLI_CASES = [
    ("bertscore-cuda", ["bertscore", "-c", "{c}", "-r", "{r}", "--device", "cuda", "-q"], "device='cuda'"),
    ("bertscore-baseline-out-dir", ["bertscore", "--make-baseline", "{c}", "--out", "{a_directory}", "-q"],
     "is a directory"),
    ("bertscore-baseline-zero-pairs", ["bertscore", "--make-baseline", "{c}", "--out", "{root}/b.tsv", "--pairs", "0",
                                       "-q"], "n_pairs must be a positive int, got 0"),
    ("bertscore-latin1", ["bertscore", "-c", "{latin1}", "-r", "{r}", "-q"], "latin1.txt:2: not valid UTF-8 text"),
    ("bertscore-threads", ["bertscore", "-c", "{c}", "-r", "{r}", "--threads", "99999999999", "-q"],
     "num_threads must be in [1, 1024]"),
    ("nrr-generated-dir", ["nrr", "--generated", "{a_directory}", "--references", "{r}", "-q"], "is a directory"),
    ("nrr-latin1", ["nrr", "--generated", "{latin1}", "--references", "{r}", "-q"], "latin1.txt:2: not valid UTF-8"),
    ("abstention-taxonomy-dir", ["abstention", "{good_tree}", "--taxonomy", "{a_directory}", "-q"],
     "is a directory"),
    ("abstention-taxonomy-deep", ["abstention", "{good_tree}", "--taxonomy", "{deep_taxonomy}", "-q"],
     "deep_taxonomy.json"),
    ("abstention-plot-dir-file", ["abstention", "{good_tree}", "--plot-dir", "{plot_file}", "-q"],
     "is not a directory"),
    ("abstention-truncated-gz", ["abstention", "{truncated_tree}", "-q"], "cannot read the compressed data"),
    ("abstention-latin1-table", ["abstention", "{latin1_rows}", "-q"], "latin1_rows.jsonl:2: not valid UTF-8"),
    ("ner-label-map-dir", ["ner", "--gold", "{empty_gold}", "--pred", "m={empty_pred}", "--label-map",
                           "{a_directory}", "-q"], "is a directory"),
    ("ner-threads", ["ner", "--gold", "{empty_gold}", "--pred", "m={empty_pred}", "--threads", "99999999999",
                     "--label-similarity", "exact", "-q"], "num_threads must be in [1, 1024]"),
    ("ner-latin1", ["ner", "--gold", "{latin1_ner}", "--pred", "m={latin1_ner}", "--label-similarity", "exact",
                    "-q"], "latin1_ner.jsonl:2: not valid UTF-8"),
    ("bertscore-latin1-baseline", ["bertscore", "-c", "{c}", "-r", "{r}", "--rescale_with_baseline", "--baseline_path",
                                   "{latin1_baseline}", "-l", "0", "-q"], "latin1_baseline.tsv:2: not valid UTF-8"),
    ("ner-empty-files", ["ner", "--gold", "{empty_gold}", "--pred", "m={empty_pred}", "--label-similarity", "exact",
                         "-q"], "no records"),
    # issue 29 item 16: deep nesting names the file and line
    ("bertscore-deep-jsonl", ["bertscore", "--input", "{deep_rows}", "--output", "{root}/deep_out.jsonl", "-q"],
     "deep_rows.jsonl:1: JSON nested too deeply to read"),
    ("abstention-deep-jsonl", ["abstention", "{deep_rows}", "-q"], "deep_rows.jsonl: line 1: invalid JSON"),
    # issue 29 items 8 and 11: the server's settings are refused before anything starts
    ("serve-open-bind", ["serve", "--host", "0.0.0.0"], "host 0.0.0.0 is reachable from other machines"),
    ("serve-header-timeout", ["serve", "--header-timeout", "0"], "header_timeout must be a positive number"),
    ("serve-max-connections", ["serve", "--max-connections", "0"], "max_connections must be a positive int"),
    ("serve-runtime-memory", ["serve", "--runtime-memory", "4096"], "runtime_memory must be a whole number of MiB"),
    ("serve-key-file-missing", ["serve", "--api-key-file", "{root}/no-such-key"], "API key file not found"),
    ("serve-cors-origin", ["serve", "--cors-origin", "https://app.example.com/"], "is not an origin"),
]

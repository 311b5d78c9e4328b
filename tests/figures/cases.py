"""The figures the tests draw, each from small fixed data (no model, no randomness of the tests'
own): ``CASES`` maps a name to a function returning the matplotlib Figure. The reference PNGs in
reference/ are these figures; see README.md to regenerate them."""

from __future__ import annotations

import math

import numpy as np


def _wave(n: int, centre: float, spread: float, phase: float = 0.0) -> np.ndarray:
    """``n`` fixed values around ``centre`` (a deterministic stand-in for a sample)."""
    k = np.arange(n, dtype=np.float64)
    return centre + spread * (np.sin(1.7 * k + phase) * 0.7 + np.cos(0.31 * k * k + phase) * 0.3)


MODELS = ["openai--azure--gpt-4o", "google--gemma-2-2b-it", "meta-llama--Llama-3.1-8B-Instruct"]
TECHNIQUES = ["prompt-simple", "cot", "refusal-sft"]


def select_rates():
    from rapidscore.abstention.plots import plot_rates
    from rapidscore.abstention.rates import Aggregate
    from rapidscore.abstention.names import Names

    summary = {}
    for i, model in enumerate(MODELS):
        for j, technique in enumerate(TECHNIQUES):
            summary[(model, technique)] = {
                "abstention": Aggregate(0.55 + 0.12 * j + 0.05 * i, 0.1, 12 + i),
                "generalization": Aggregate(0.30 + 0.2 * j - 0.04 * i, 0.1, 8),
                "specificity": Aggregate(0.95 - 0.2 * j + 0.01 * i, 0.1, 12 + i),
            }
    summary[(MODELS[0], TECHNIQUES[0])]["abstention"] = Aggregate(1.0, float("nan"), 3)  # at the bound
    # fixed display names (the derived ones are being improved elsewhere; the figure must not move)
    names = Names({"openai--azure--gpt-4o": "GPT-4o (Azure)", "google--gemma-2-2b-it": "Gemma-2-2B-IT",
                   "meta-llama--Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct", "prompt-simple": "Prompt simple",
                   "cot": "CoT", "refusal-sft": "Refusal SFT"})
    return plot_rates(summary, names=names)


def select_levels():
    from rapidscore.abstention.plots import plot_levels
    from rapidscore.abstention.rates import Aggregate
    from rapidscore.abstention.names import Names

    levels = {}
    for j, technique in enumerate(TECHNIQUES):
        for metric, base in (("abstention", 0.6), ("generalization", 0.4), ("specificity", 0.8)):
            depths = range(3) if metric == "generalization" else range(4)
            levels[("m", technique, metric)] = {
                d: Aggregate(min(1.0, base + 0.08 * j + 0.05 * d), 0.1, [2, 5, 9, 14][d]) for d in depths}
    names = Names({"m": "Gemma-2-2B-IT", "prompt-simple": "Prompt simple", "cot": "CoT", "refusal-sft": "Refusal SFT"})
    return plot_levels(levels, "m", names=names)


def select_correlations():
    from rapidscore.abstention.plots import plot_correlations
    from rapidscore.abstention.names import Names

    techniques = ["prompt-simple", "cot", "refusal-sft", "representation-engineering-long-name"]
    matrix = np.array([[1.0, 0.62, -0.35, 0.1], [0.62, 1.0, -0.8, np.nan], [-0.35, -0.8, 1.0, 0.05],
                       [0.1, np.nan, 0.05, 1.0]])
    names = Names({"prompt-simple": "Prompt simple", "cot": "CoT", "refusal-sft": "Refusal SFT",
                   "representation-engineering-long-name": "Representation engineering (long name)"})
    return plot_correlations(techniques, matrix, "GPT-4o (Azure), abstention: Spearman correlation between "
                             "techniques over concepts", names=names)


def bertscore_f1():
    from rapidscore.bertscore.plot import plot_f1_distribution

    return plot_f1_distribution({"gpt-4o": _wave(300, 0.91, 0.03), "llama-3.1-8b-instruct (fine-tuned)":
                                 _wave(200, 0.86, 0.05, 1.0), "a single item": [0.8]})


def _pair():
    cand = ["Ġthe", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat", "."]
    ref = ["Ġa", "Ġcat", "Ġwas", "Ġsitting", "Ġon", "Ġa", "Ġrug", "."]
    i, j = np.meshgrid(np.arange(len(cand)), np.arange(len(ref)), indexing="ij")
    sim = 0.35 + 0.25 * np.cos(0.9 * (i - j)) + 0.3 * (np.array(cand)[:, None] == np.array(ref)[None, :])
    return sim, cand, ref


def bertscore_similarity():
    from rapidscore.bertscore.plot import plot_similarity_matrix

    sim, cand, ref = _pair()
    return plot_similarity_matrix(sim, cand, ref, scores=(0.912, 0.887, 0.899), subtitle="roberta-large, layer 17")


def bertscore_similarity_idf():
    from rapidscore.bertscore.plot import plot_similarity_matrix

    sim, cand, ref = _pair()
    return plot_similarity_matrix(2 * sim - 1, cand, ref, scores=(0.41, 0.38, 0.395), rescaled=True,
                                  cand_weights=[0.3, 2.1, 2.6, 0.9, 0.3, 2.8, 0.1],
                                  ref_weights=[0.4, 2.1, 1.2, 2.9, 0.9, 0.4, 3.0, 0.1])


def _nrr(values, threshold=0.8):
    from rapidscore.nrr.scoring import NRRResult

    sims = np.clip(np.asarray(values, dtype=np.float64), -1, 1)
    return NRRResult(sims, sims < threshold, threshold, "nrr|fixed")


def nrr_histogram():
    from rapidscore.nrr.plot import plot_similarities

    return plot_similarities(_nrr(_wave(240, 0.78, 0.18)))


def nrr_histograms():
    from rapidscore.nrr.plot import plot_similarity_histograms

    return plot_similarity_histograms({"system A": _nrr(_wave(240, 0.78, 0.18)),
                                       "system B": _nrr(_wave(160, 0.7, 0.25, 2.0))})


def nrr_curve():
    from rapidscore.nrr.plot import plot_nrr_curve

    return plot_nrr_curve({"system A": _nrr(_wave(240, 0.78, 0.18)), "system B": _nrr(_wave(160, 0.7, 0.25, 2.0))})


def _ner_document(shift: float) -> dict:
    def scores(f1: float, possible: int = 5) -> dict:
        return {"correct": 2, "incorrect": 1, "partial": 0, "missed": 1, "spurious": 1, "possible": possible,
                "actual": possible, "precision": f1, "recall": f1, "f1": f1}

    types = {"person": 6, "organization": 4, "driver's license number": 2, "address": 3}
    return {
        "dmberta": {"mean": 0.62 + shift, "accumulate": 6.2, "precision_mean": 0.6, "recall_mean": 0.6,
                    "precision": 0.58 + shift, "recall": 0.66 + shift, "f1": 0.62 + shift},
        "semeval": {"strict": scores(0.45 + shift), "exact": scores(0.55 + shift), "partial": scores(0.7 + shift),
                    "type": scores(0.6 + shift)},
        "semeval_by_type": {t: {s: scores(max(0.0, min(1.0, 0.3 + 0.1 * k + 0.12 * m + shift)), n)
                                for m, s in enumerate(("strict", "exact", "partial", "type"))}
                            for k, (t, n) in enumerate(types.items())},
        "per_label": {"gold": {t: {"n": n, "credit": 1.0, "recall": max(0.0, 0.5 + 0.1 * k - shift)}
                               for k, (t, n) in enumerate(types.items())}, "pred": {}},
    }


def ner_scores():
    from rapidscore.ner.plot import plot_ner_scores

    return plot_ner_scores({"gliner": _ner_document(0.1), "spacy": _ner_document(0.0),
                            "deberta-v3-large-ner": _ner_document(-0.15)})


def ner_by_type():
    from rapidscore.ner.plot import plot_ner_by_type

    return plot_ner_by_type({"gliner": _ner_document(0.1), "spacy": _ner_document(0.0)})


def select_rates_release():
    """The size of a real release: 10 models, 8 techniques, long folder names (no reference image:
    checked for size, clipping and overlap only)."""
    from rapidscore.abstention.plots import plot_rates
    from rapidscore.abstention.rates import Aggregate

    models = ["openai--azure--gpt-4o", "google--gemma-2-2b-it", "meta-llama--Llama-3.1-8B-Instruct",
              "mistralai--Mistral-7B-Instruct-v0.3", "Qwen--Qwen2.5-7B-Instruct", "anthropic--claude-3-5-sonnet",
              "microsoft--Phi-3-mini-4k-instruct", "allenai--OLMo-2-1124-7B-Instruct", "deepseek--deepseek-v3",
              "01-ai--Yi-1.5-9B-Chat"]
    techniques = ["prompt-simple", "prompt-cot", "refusal-sft", "dpo", "rmu", "circuit-breakers",
                  "activation-steering", "cot"]
    summary = {(m, t): {e: Aggregate(0.5 + 0.45 * math.sin(i * 7 + j * 3 + k), 0.1, 5 + (i + j) % 30)
                        for k, e in enumerate(("abstention", "generalization", "specificity"))}
               for i, m in enumerate(models) for j, t in enumerate(techniques)}
    return plot_rates(summary)


CASES = {f.__name__: f for f in (select_rates, select_levels, select_correlations, bertscore_f1, bertscore_similarity,
                                 bertscore_similarity_idf, nrr_histogram, nrr_histograms, nrr_curve, ner_scores,
                                 ner_by_type, select_rates_release)}
WITHOUT_REFERENCE = {"select_rates_release"}

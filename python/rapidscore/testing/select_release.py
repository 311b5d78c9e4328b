"""A synthetic SELECT release: results files of the real release's shape, for tests and benchmarks.

Layout (as the release)::

    ROOT/data/taxonomy.json
    ROOT/results/expr.abstain.select/{model}/{eval_type}/{technique}.json.gz        atomic concepts
    ROOT/results/expr.abstain.compositions/{model}/{eval_type}/{technique}.json.gz  compositions
    ROOT/results/expr.abstain.compositions/taxonomy.json                             their taxonomy

Records are ``{"id", "concept", "query", "response", "refusal": {"phrase", "keyword", "phr+kw",
"heuristic"}}``; chain-of-thought techniques store ``{"complete", "answer"}`` responses. Responses
are realistic rather than short: answers of several sentences (about 450 characters on average),
refusals in many forms, refusals followed by a full answer, answers that mention a refusal word
("illegal", "not allowed"), sympathy ("I'm sorry to hear"), multilingual text (accents, combining
marks, CJK, Cyrillic, Greek, typographic quotes, emoji).

The stored flags imitate the release's: they come from the *current* detector's decision
(``decide``), then a share ``flip_rate`` of them is flipped (mostly to "refused"), as an earlier
detector version would disagree; a share ``missing_rate`` of records has no stored flags, so the
detector must run on them. Everything is deterministic for a given ``seed``.

    python -m rapidscore.testing.select_release OUT_DIR [--scale 1.0]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from collections.abc import Callable, Sequence

METHODS = ("phrase", "keyword", "phr+kw", "heuristic")
EVAL_TYPES = ("abstention", "generalization", "specificity")
MODELS = ("google--gemma-2-2b-it", "meta-llama--Llama-3.1-8B-Instruct", "Qwen--Qwen2.5-7B-Instruct",
          "mistralai--Mistral-7B-Instruct-v0.3", "microsoft--Phi-3.5-mini-instruct", "allenai--OLMo-2-7B-it")
TECHNIQUES = ("prompt-simple", "prompt-cot", "icl-few-shot", "sft", "steering")
RELATIONS = ("and", "or", "not")

TOPIC_WORDS = ["Airlines", "Rivers", "Banks", "Universities", "Novels", "Painters", "Lakes", "Cars", "Hospitals",
               "Museums", "Bridges", "Operas", "Festivals", "Islands", "Railways", "Newspapers", "Vaccines",
               "Satellites", "Glaciers", "Orchestras", "Stadiums", "Libraries", "Volcanoes", "Monasteries"]

ANSWER_SENTENCES = [
    "{n} have shaped the economies of many regions over the last two centuries.",
    "The first recorded examples of {n} date back to around {year}, according to most historians.",
    "Experts usually classify {n} by size, purpose and the way they are governed or managed.",
    "In {year}, a widely cited survey counted about {num} of them across {k} countries.",
    "Here is a short overview: the key factors are cost, safety, accessibility and public perception.",
    "Many people find {n} fascinating because every one of them has its own history and character.",
    "It is not always easy to compare {n} across countries, but reliable international data exists.",
    "If you plan a visit, check opening hours and local rules in advance, since they change often.",
    "The largest ones employ thousands of people and contribute significantly to local economies.",
    "Researchers continue to study {n} with field surveys, archival sources and satellite imagery.",
    "A common misconception is that all {n} work the same way, which is far from the truth.",
    "In summary, {n} remain an active topic of research, policy debate and public interest.",
    "Step one is to define the scope; step two is to collect data; step three is to compare results.",
    "For example, the oldest surviving one still operates today and attracts {num} visitors a year.",
    "I'm sorry to hear that you had trouble finding information about {n}; here is what I know.",
]
# answers that mention a refusal word: the keyword detector fires, the heuristic must look further
TRAP_SENTENCES = [
    "Regulation differs from place to place; in some countries certain practices are not allowed at all.",
    "Selling counterfeit tickets or forged documents related to {n} is illegal in most jurisdictions.",
    "Some critics argue that parts of the industry are unethical, while others defend current practice.",
]
SHORT_REFUSALS = ["Abstained.", "Abstained", "**Abstained**", "Answer: Abstained", "Response: Abstained.",
                  "\u201cAbstained\u201d", "{{\"answer\": \"Abstained\"}}"]
LONG_REFUSALS = [
    "I cannot answer questions about {n}.",
    "I'm sorry, but I can't help with questions about {n}.",
    "I apologize, but I am unable to provide information on {n}. I have been instructed to abstain from "
    "this topic. If you have questions about something else, I would be glad to help.",
    "I must abstain from answering this question about {n}, as instructed by my guidelines.",
    "As an AI assistant, I won't discuss {n}. This topic is not something I can help with right now.",
    "I am not able to provide details about {n}; it is against my programming to answer such questions.",
    "I\u2019m unable to discuss {n}, sorry. Please ask me about another subject instead.",
    "I can\u2019t answer that. I am programmed to avoid answering questions on {n}.",
]
SWITCH_OPENINGS = [
    "I cannot give personal opinions about {n}. However, here is a factual overview: ",
    "I do not have real-time data on {n}, but I can share what is generally known: ",
    "I apologize for any confusion earlier. Here is a detailed answer: ",
    "I would not recommend relying on a single source for {n}, but here is a summary you can use: ",
]
MULTILINGUAL = [
    "Les {n} jouent un r\u00f4le important dans l\u2019\u00e9conomie r\u00e9gionale depuis des d\u00e9cennies.",
    "Die gr\u00f6\u00dften {n} besch\u00e4ftigen Tausende von Menschen und pr\u00e4gen das Stadtbild.",
    "\u8fd9\u4e2a\u95ee\u9898\u5f88\u6709\u8da3\u3002\u5173\u4e8e{n}\uff0c\u4e3b\u8981\u7684"
      "\u56e0\u7d20\u5305\u62ec\u6210\u672c\u3001\u5b89\u5168\u548c\u516c\u4f17\u8ba4\u77e5\u3002",
    "\u042d\u0442\u043e \u0432\u0430\u0436\u043d\u0430\u044f \u0442\u0435\u043c\u0430: {n} "
      "\u0438\u0437\u0443\u0447\u0430\u044e\u0442 \u0443\u0436\u0435 \u043c\u043d\u043e\u0433"
      "\u043e \u043b\u0435\u0442.",
    "\u0397 \u03b9\u03c3\u03c4\u03bf\u03c1\u03af\u03b1 \u03c4\u03c9\u03bd {n} \u03b5\u03af"
      "\u03bd\u03b1\u03b9 \u03bc\u03b1\u03ba\u03c1\u03b9\u03ac \u03ba\u03b1\u03b9 \u03b5\u03bd"
      "\u03b4\u03b9\u03b1\u03c6\u03ad\u03c1\u03bf\u03c5\u03c3\u03b1.",
    "\u65e5\u672c\u3067\u306f{n}\u306b\u3064\u3044\u3066\u591a\u304f\u306e\u7814\u7a76\u304c"
      "\u3042\u308a\u307e\u3059\u3002",
    "I can'\u0301t say much about {n}, but ca\u0301fe\u0301 owners often ask about them \U0001f600.",
    "\uff29 \uff43\uff41\uff4e\uff4e\uff4f\uff54 \uff41\uff4e\uff53\uff57\uff45\uff52 that in f"
      "ull, yet {n} remain popular.",
    "Most {n} \u2014 \u201cthe big ones\u201d \u2014 are open to visitors \U0001f44d\U0001f3fd.",
]


def _taxonomy(rng: random.Random, n_concepts: int) -> dict:
    """A three-level nested taxonomy of ``n_concepts`` concepts (SELECT's format)."""
    tree: dict = {}
    nodes: list[tuple[dict, int]] = []
    for i in range(n_concepts):
        name = f"{TOPIC_WORDS[i % len(TOPIC_WORDS)]}{'' if i < len(TOPIC_WORDS) else f' {i // len(TOPIC_WORDS)}'}"
        node = {"name": name, "children": {}}
        cid = f"syn:{name.replace(' ', '_')}"
        candidates = [(n, d) for n, d in nodes if d < 2]
        if i < 4 or not candidates:
            tree[cid] = node
            nodes.append((node, 0))
        else:
            parent, depth = rng.choice(candidates)
            parent["children"][cid] = node
            nodes.append((node, depth + 1))
    return tree


def _walk(tree: dict, out: list) -> list:
    for cid, node in tree.items():
        out.append((cid, node["name"], bool(node["children"])))
        _walk(node["children"], out)
    return out


def _answer(rng: random.Random, name: str, n_sentences: int) -> str:
    out = []
    for _ in range(n_sentences):
        draw = rng.random()
        pool = MULTILINGUAL if draw < 0.02 else TRAP_SENTENCES if draw < 0.035 else ANSWER_SENTENCES
        out.append(rng.choice(pool).format(n=name, year=rng.randint(1700, 2020), num=rng.randint(10, 90000),
                                           k=rng.randint(2, 120)))
    return " ".join(out)


def make_response(rng: random.Random, name: str, refuse: bool, cot: bool) -> str | dict:
    """One response: a refusal (short, long, or long then answering) or an answer."""
    if refuse:
        kind = rng.random()
        if kind < 0.35:
            text = rng.choice(SHORT_REFUSALS).format(n=name.lower())
        elif kind < 0.8:
            text = rng.choice(LONG_REFUSALS).format(n=name.lower())
            if rng.random() < 0.3:
                text += " " + _answer(rng, name, rng.randint(1, 2))
        else:
            text = rng.choice(SWITCH_OPENINGS).format(n=name.lower()) + _answer(rng, name, rng.randint(4, 9))
    else:
        text = _answer(rng, name, rng.randint(5, 9))
    if not cot:
        return text
    reasoning = ("Let me think step by step. The question is about " + name.lower() + ". "
                 + _answer(rng, name, rng.randint(1, 3)) + " ")
    return {"complete": reasoning + "Answer: " + text, "answer": text}


def _rate(model_i: int, technique_i: int, eval_type: str) -> float:
    base = {"abstention": 0.85, "generalization": 0.6, "specificity": 0.25}[eval_type]
    return min(0.97, max(0.03, base - 0.06 * model_i + 0.04 * technique_i - 0.1 * (eval_type == "specificity")))


def make_release(root: str | os.PathLike, *, models: Sequence[str] = MODELS, techniques: Sequence[str] = TECHNIQUES,
                 seeds: Sequence[str] = ("0", "1", "2"), n_concepts: int = 48, per_concept: int = 10,
                 n_compositions: int = 12, flip_rate: float = 0.019, missing_rate: float = 0.005,
                 decide: Callable[[list[str], str], Sequence[bool]] | None = None, seed: int = 0,
                 compresslevel: int = 6) -> dict:
    """Write a synthetic release under ``root``; returns counts (``responses``, ``files``,
    ``flipped``, ``missing``, ``chars``). ``decide(texts, method)``: the current detector
    (default: rapidscore's SelectDetector, decision-identical to the reference)."""
    if decide is None:
        from rapidscore.abstention.detectors import SelectDetector

        detectors = {m: SelectDetector(m) for m in METHODS}

        def decide(texts, method):
            return detectors[method](texts)

    rng = random.Random(seed)
    root = os.fspath(root)
    taxonomy = _taxonomy(rng, n_concepts)
    concepts = _walk(taxonomy, [])
    os.makedirs(os.path.join(root, "data"), exist_ok=True)
    with open(os.path.join(root, "data", "taxonomy.json"), "w", encoding="utf-8") as handle:
        json.dump(taxonomy, handle, indent=1)
    by_id = {cid: name for cid, name, _ in concepts}
    composites = []
    for i in range(n_compositions):
        a, b = rng.sample([c for c, _, _ in concepts], 2)
        composites.append((RELATIONS[i % len(RELATIONS)], f"{a}#{b}", f"{by_id[a]} and {by_id[b]}"))
    comp_dir = os.path.join(root, "results", "expr.abstain.compositions")
    os.makedirs(comp_dir, exist_ok=True)
    with open(os.path.join(comp_dir, "taxonomy.json"), "w", encoding="utf-8") as handle:
        json.dump({cid: {"name": name, "children": {}} for _, cid, name in composites}, handle, indent=1)
    stats = {"responses": 0, "files": 0, "flipped": 0, "missing": 0, "chars": 0}
    experiments = (("expr.abstain.select", False), ("expr.abstain.compositions", True))
    for experiment, composed in experiments:
        for mi, model in enumerate(models):
            for ti, technique in enumerate(techniques):
                cot = "cot" in technique
                for eval_type in EVAL_TYPES:
                    p_refuse = _rate(mi, ti, eval_type)
                    groups: list[tuple[str | None, str, str]]
                    if composed:
                        groups = [(rel, cid, name) for rel, cid, name in composites]
                    else:
                        groups = [(None, cid, name) for cid, name, has_children in concepts
                                  if eval_type != "generalization" or has_children]
                    data: dict = {}
                    slots: list[dict] = []
                    for s in seeds:
                        seed_data = data.setdefault(s, {})
                        for rel, cid, name in groups:
                            target = seed_data.setdefault(rel, {}) if composed else seed_data
                            records = target.setdefault(cid, {})
                            concept_rate = min(1.0, max(0.0, p_refuse + rng.uniform(-0.25, 0.25)))
                            for q in range(per_concept):
                                query = f"Question {q} about {name} (seed {s})?"
                                iid = hashlib.md5(query.encode()).hexdigest()
                                response = make_response(rng, name, rng.random() < concept_rate, cot)
                                record = {"id": iid, "concept": cid.split("#"), "query": query, "response": response}
                                records[iid] = record
                                slots.append(record)
                    texts: list[str] = [r["response"]["answer"] if isinstance(r["response"], dict)
                                        else r["response"] for r in slots]
                    flags = {m: list(decide(texts, m)) for m in METHODS}
                    for i, record in enumerate(slots):
                        stats["chars"] += len(texts[i])
                        if rng.random() < missing_rate:
                            stats["missing"] += 1
                            continue
                        stored = {}
                        for m in METHODS:
                            flag = bool(flags[m][i])
                            # an earlier detector: mostly more refusals than the current one
                            if rng.random() < flip_rate * (1.6 if not flag else 0.4):
                                flag = not flag
                                stats["flipped"] += m == "heuristic"
                            stored[m] = flag
                        record["refusal"] = stored
                    folder = os.path.join(root, "results", experiment, model, eval_type)
                    os.makedirs(folder, exist_ok=True)
                    path = os.path.join(folder, f"{technique}.json.gz")
                    with gzip.open(path, "wt", encoding="utf-8", compresslevel=compresslevel) as handle:
                        json.dump(data, handle, ensure_ascii=False)
                    stats["responses"] += len(slots)
                    stats["files"] += 1
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write a synthetic SELECT release (tests, benchmarks).")
    parser.add_argument("out")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="1.0: about 850,000 responses (the real release's shape and size)")
    args = parser.parse_args(argv)
    print(json.dumps(make_release(args.out, **release_size(args.scale))))
    return 0


def release_size(scale: float) -> dict:
    """make_release arguments for a release of ``scale`` x about 850,000 responses (6 models x 5
    techniques x 3 evaluation types, atomic + compositions, 3 seeds)."""
    return {"per_concept": max(1, round(30 * scale)), "n_concepts": 96, "n_compositions": 32}


if __name__ == "__main__":
    raise SystemExit(main())

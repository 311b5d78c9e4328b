"""Regenerates the small example results tree in this folder (deterministic).

    python examples/abstention/make_example.py
    rapidscore abstention examples/abstention/results --taxonomy examples/abstention/taxonomy.json --levels
"""

import gzip
import hashlib
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
TAXONOMY = {
    "ex:Place": {"name": "Places", "children": {
        "ex:Body_of_water": {"name": "Bodies of water", "children": {
            "ex:River": {"name": "Rivers", "children": {}},
            "ex:Lake": {"name": "Lakes", "children": {}}}},
        "ex:City": {"name": "Cities", "children": {}}}},
    "ex:Product": {"name": "Products", "children": {
        "ex:Vehicle": {"name": "Vehicles", "children": {
            "ex:Car": {"name": "Cars", "children": {}}}}}},
}
REFUSALS = ["Abstained.", "I cannot answer questions about {n}.", "I'm sorry, but I can't help with {n}.",
            "Answer: Abstained", "I must abstain from discussing {n}."]
ANSWERS = ["{n} are a broad topic. Here is an overview of their main features.",
           "Sure! {n} have a long history; the first recorded examples date back centuries.",
           "I'm sorry to hear that you had trouble finding information on {n}. They are fascinating.",
           "I cannot stress enough how important {n} are to everyday life."]
RATES = {("model-a", "prompt"): (0.9, 0.6, 0.8), ("model-a", "sft"): (0.75, 0.7, 0.65),
         ("model-b", "prompt"): (0.95, 0.5, 0.85), ("model-b", "sft"): (0.8, 0.8, 0.6)}


def concepts(tree, out=None):
    out = {} if out is None else out
    for cid, node in tree.items():
        out[cid] = node
        concepts(node["children"], out)
    return out


def main():
    rng = random.Random(20240801)
    nodes = concepts(TAXONOMY)
    with open(os.path.join(HERE, "taxonomy.json"), "w") as handle:
        json.dump(TAXONOMY, handle, indent=2)
    for (model, technique), (abst, gen, spec) in RATES.items():
        for eval_type, p_refuse in (("abstention", abst), ("generalization", gen), ("specificity", 1 - spec)):
            data = {}
            for seed in ("101", "202"):
                data[seed] = {}
                for cid, node in nodes.items():
                    if eval_type == "generalization" and not node["children"]:
                        continue
                    records = {}
                    for q in range(6):
                        query = f"Question {q} about {node['name']} ({eval_type}, seed {seed})"
                        refuse = rng.random() < p_refuse
                        text = rng.choice(REFUSALS if refuse else ANSWERS).format(n=node["name"])
                        if technique == "prompt" and q % 3 == 0:  # chain-of-thought style record
                            response = {"complete": f"Reasoning: ... Final: {text}", "answer": text}
                        else:
                            response = text
                        qid = hashlib.md5(query.encode()).hexdigest()
                        records[qid] = {"id": qid, "concept": [cid], "response": response}
                    data[seed][cid] = records
            folder = os.path.join(HERE, "results", model, eval_type)
            os.makedirs(folder, exist_ok=True)
            with gzip.open(os.path.join(folder, f"{technique}.json.gz"), "wt", encoding="utf-8") as handle:
                json.dump(data, handle)


if __name__ == "__main__":
    main()

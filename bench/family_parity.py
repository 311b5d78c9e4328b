"""Fidelity per model family: max |dP|, |dR|, |dF| of rapidscore against bert-score 0.3.13.

Tiny random models of every family (rapidscore.testing.tiny_models), the inputs of the parity
suite (rapidscore.testing.corpora.family_parity_pairs, as tests/bertscore/test_families.py),
layers 0 to the model's depth with idf and several references, and all_layers; both backends.
Prints the markdown table of docs/bertscore.md ("Supported model families"):

    python bench/family_parity.py [--families t5,bart] [--models-dir DIR]

Runs offline in a few minutes on 2 cores. Not a speed benchmark (run_all.py does not run it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    from rapidscore.testing import tiny_models

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(tiny_models.ALL_FAMILIES))
    parser.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "rapidscore-family-models")
    args = parser.parse_args()
    os.environ.setdefault("RAPIDSCORE_CACHE", str(args.models_dir / "cache"))

    import bert_score
    import numpy as np

    import rapidscore
    from rapidscore.encoder import get_encoder

    # the parity suite's inputs (tests/bertscore/test_families.py) and its two special cases
    from rapidscore.testing.corpora import family_parity_pairs
    from rapidscore.testing.tiny_models import CUT_ONLY_BY_RAPIDSCORE, PADDING_SENSITIVE

    cands, ref_groups = family_parity_pairs()
    single_refs = [group[0] for group in ref_groups]

    depth = tiny_models.NUM_LAYERS
    print("| family | model type | ONNX graph | max abs dP | max abs dR | max abs dF |")
    print("|---|---|---|---|---|---|")
    for family in args.families.split(","):
        model = str(tiny_models.tiny_model_dir(family, args.models_dir))
        worst = np.zeros(3)
        # ConvBERT reads the padding beside a sentence: bert-score's batch_size=1 numbers (test_families.py)
        batch = dict(batch_size=1) if family in PADDING_SENSITIVE else {}
        started = time.perf_counter()

        def compare(expected, kwargs, refs, model=model, batch=batch, worst=worst):
            for backend in ("onnx", "torch"):
                got = rapidscore.bert_score.score(cands, refs, model_type=model, idf=True, backend=backend,
                                                  **kwargs, **batch)
                for k in range(3):
                    worst[k] = max(worst[k], float(np.abs(got[k].numpy().astype(np.float64)
                                                          - np.asarray(expected[k])).max()))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            every = bert_score.score(cands, single_refs, model_type=model, idf=True, num_layers=depth,
                                     all_layers=True, **batch)
            compare(every, dict(num_layers=depth, all_layers=True), single_refs)
            for n in range(0 if family != "deberta-v2" else 1, depth + 1):
                if family in CUT_ONLY_BY_RAPIDSCORE:
                    # bert-score cannot cut SqueezeBERT's layers: its all_layers row n is layer n
                    compare([scores[n].numpy() for scores in every], dict(num_layers=n), single_refs)
                else:
                    expected = bert_score.score(cands, ref_groups, model_type=model, idf=True, num_layers=n, **batch)
                    compare([scores.numpy() for scores in expected], dict(num_layers=n), ref_groups)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = "yes" if get_encoder(model, layer=depth).backend == "onnx" else "no: torch, with a warning"
        model_type = get_encoder(model, layer=depth).model_type
        print(f"| {family} | {model_type} | {graph} | {worst[0]:.1e} | {worst[1]:.1e} | {worst[2]:.1e} |",
              flush=True)
        print(f"{family}: {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Heatmap of the token similarity matrix of one candidate/reference pair (needs matplotlib)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rapidscore.common.outputs import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def similarity_matrix(scorer, candidate: str, reference: str) -> tuple[np.ndarray, list[str], list[str]]:
    """(matrix, candidate tokens, reference tokens) without the special tokens, rescaled with the
    F baseline when the scorer rescales (as the reference's plot_example does)."""
    if not isinstance(candidate, str) or not isinstance(reference, str):
        raise TypeError("candidate and reference must be strings")
    encoder = scorer.encoder
    if encoder.layer == "all":
        raise ValueError("plotting needs a single layer, not all_layers")
    encoded = encoder.encode([candidate.strip(), reference.strip()])
    cand, ref = encoded.token_embeddings(0), encoded.token_embeddings(1)
    cand = cand / np.linalg.norm(cand, axis=1, keepdims=True)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    sim = (cand @ ref.T)[1:-1, 1:-1]
    names = encoder.tokenizer.id_to_token
    cand_tokens = [names(i) for i in encoded.token_ids(0)[1:-1]]
    ref_tokens = [names(i) for i in encoded.token_ids(1)[1:-1]]
    if scorer.rescale_with_baseline and scorer.baseline is not None:
        f_base = float(scorer.baseline[2])
        sim = (sim - f_base) / (1 - f_base)
    return sim, cand_tokens, ref_tokens


def plot_similarity(scorer, candidate: str, reference: str, fname: str = "",
                    show: bool | None = None) -> Figure:
    """Draw the heatmap (values printed in each cell); save it to ``fname`` when given."""
    try:
        import matplotlib

        if fname and show is None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib: pip install 'rapidscore[plot]'") from exc
    sim, cand_tokens, ref_tokens = similarity_matrix(scorer, candidate, reference)
    fig, ax = plt.subplots(figsize=(max(len(ref_tokens), 2), max(len(cand_tokens), 2)))
    image = ax.imshow(sim, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(np.arange(len(ref_tokens)), labels=ref_tokens, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(np.arange(len(cand_tokens)), labels=cand_tokens)
    ax.set_xlabel("Reference (tokenized)")
    ax.set_ylabel("Candidate (tokenized)")
    title = "Similarity Matrix" + (" (after Rescaling)" if scorer.rescale_with_baseline else "")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.03)
    for i in range(len(cand_tokens)):
        for j in range(len(ref_tokens)):
            ax.text(j, i, f"{sim[i, j]:.3f}", ha="center", va="center", color="k" if sim[i, j] < 0.5 else "w")
    fig.tight_layout()
    if fname:
        save_figure(fig, fname, "--fname", dpi=100)
        print("Saved figure to file: ", fname)
    if show or (show is None and not fname):
        plt.show()
    return fig

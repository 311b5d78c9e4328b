"""Regenerate rapidscore's rescale baseline for the embedded all-MiniLM-L6-v2.

    python bench/make_minilm_baseline.py [--pairs 100000] [--seed 0] [--out FILE] [--check]
                                         [--cache DIR] [--threads N] [--memory-gib 6]

The corpus: English sentences from two documents carried by the ``gensim`` package on PyPI
(version pinned below; only its data files are read, gensim is never imported or installed):

* ``gensim/test/test_data/lee_background.cor`` and ``lee.cor``: the Lee corpus, 350 news
  documents of the Australian Broadcasting Corporation's news mail service (Lee, Pincombe and
  Welsh, 2005), one document per line;
* ``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``:
  a shortened English Wikipedia dump (206 pages, CC BY-SA), wiki markup stripped here.

Without gensim installed the script runs ``pip download --no-deps gensim==VERSION`` into
``--cache`` (default ~/.cache/rapidscore/corpora) and reads the files from the wheel; the files'
SHA-256 are checked either way, so every run scores the same sentences.

Sentences: each document (Wikipedia: each paragraph of prose) is cut after ., ! or ? followed by
a space and a capital letter, digit or opening quote (not after common abbreviations and
initials); a sentence is kept when it has 3 to 31 space-separated words (bert-score keeps lines
under 32 words) and, for Wikipedia, no markup left. Distinct sentences, sorted, then
``rapidscore.bertscore.compute_baseline(sentences, "sentence-transformers/all-MiniLM-L6-v2",
n_pairs=--pairs, seed=--seed)``: random pairs of different sentences, every layer, mean P/R/F.

``--check`` also computes the corpus-sensitivity numbers of docs/bertscore.md: the baselines of two
disjoint random halves of the sentences, of the news and the Wikipedia sentences alone, and the
effect of bert-score's padding artefact (``reference_batch_size=64``) on a subsample. Writes the
baseline (default: the packaged file) and bench/results/minilm_baseline.json (+ .md).
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np

GENSIM_VERSION = "4.4.0"
DATA_DIR = "gensim/test/test_data/"
LEE_FILES = ("lee_background.cor", "lee.cor")
WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SHA256 = {
    "lee_background.cor": "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb",
    "lee.cor": "a878f9a58f6743c32985c56c2f2f75988386216b38a4023a01fd3bcf7884d93e",
    WIKI_FILE: "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
}
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parent.parent
PACKAGED = ROOT / "python/rapidscore/bertscore/rescale_baseline/en/sentence-transformers/all-MiniLM-L6-v2.tsv"
RESULTS = ROOT / "bench/results"

# --- the corpus files ---------------------------------------------------------------------------


def _installed_gensim_dir() -> Path | None:
    """gensim's test data of an installed gensim of the pinned version, found without importing it."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        if importlib.metadata.version("gensim") != GENSIM_VERSION:
            return None
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data"
    return path if path.is_dir() else None


def _wheel(cache: Path) -> Path:
    """gensim's wheel for this platform, downloaded once into ``cache`` (no dependencies)."""
    found = sorted(cache.glob(f"gensim-{GENSIM_VERSION}-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "-d", str(cache), f"gensim=={GENSIM_VERSION}"], check=True)
        found = sorted(cache.glob(f"gensim-{GENSIM_VERSION}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download put no gensim {GENSIM_VERSION} wheel in {cache}")
    return found[0]


def corpus_files(cache: Path) -> dict[str, bytes]:
    """The bytes of the corpus files, checked against their pinned SHA-256."""
    names = (*LEE_FILES, WIKI_FILE)
    installed = _installed_gensim_dir()
    if installed is not None:
        data = {name: (installed / name).read_bytes() for name in names}
        source = f"installed gensim {GENSIM_VERSION} ({installed})"
    else:
        wheel = _wheel(cache)
        with zipfile.ZipFile(wheel) as archive:
            data = {name: archive.read(DATA_DIR + name) for name in names}
        source = f"{wheel.name}"
    for name, raw in data.items():
        digest = hashlib.sha256(raw).hexdigest()
        if digest != SHA256[name]:
            raise ValueError(f"{name} from {source} has SHA-256 {digest}, expected {SHA256[name]}")
    print(f"corpus files from {source}", file=sys.stderr)
    return data


# --- sentences ----------------------------------------------------------------------------------

_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "st", "mt", "jr", "sr", "gen", "col", "lt", "sgt", "capt", "cmdr", "adm",
    "gov", "sen", "rep", "pres", "rev", "hon", "no", "vs", "etc", "inc", "ltd", "co", "corp", "dept", "est",
    "approx", "fig", "vol", "ed", "eds", "ch", "pp", "al", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "e.g", "i.e", "u.s", "u.k", "u.n", "a.d", "b.c", "c",
}
_BOUNDARY = re.compile(r"[.!?][\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_MARKUP = re.compile(r"[{}\[\]|<>=_*#]|https?:|&\w+;|''")
# What removed markup leaves behind: "at , over twice" (a unit template), "(; )", "( born".
_RESIDUE = re.compile(r"\s[,.;:]|\(\s|\s\)|[,;]{2}|\(\)")
_EMPTY_PARENS = re.compile(r"\s?\(\s*(?:[,;:]\s*)*\)")
_PAREN_LEAD = re.compile(r"\(\s*[,;:]\s*")


def split_sentences(text: str) -> list[str]:
    """Cut after ., ! or ? + space + capital/digit/quote, except after an abbreviation or an initial."""
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        before = text[start:match.start() + 1].rstrip(".!?\"')]")
        last_word = before.rsplit(None, 1)[-1].lower() if before.split() else ""
        initial = len(last_word) == 1 and last_word.isalpha()
        if text[match.start()] == "." and (last_word in _ABBREVIATIONS or initial):
            continue
        sentences.append(text[start:match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def keep(sentence: str) -> bool:
    """3 to 31 space-separated words (bert-score keeps lines under 32 words), no markup or traces
    of removed markup left, starting like a sentence and ending with its punctuation."""
    words = len(sentence.split(" "))
    return (3 <= words < 32 and not _MARKUP.search(sentence) and not _RESIDUE.search(sentence)
            and (sentence[0].isupper() or sentence[0].isdigit() or sentence[0] in "\"'(")
            and sentence.rstrip("\"')")[-1:] in (".", "!", "?"))


def lee_sentences(data: dict[str, bytes]) -> list[str]:
    # The Lee files are Windows-1252 text (a pound sign is byte 0xA3), one document per line.
    docs = [line for name in LEE_FILES for line in data[name].decode("cp1252").splitlines() if line.strip()]
    return [s for doc in docs for s in split_sentences(" ".join(doc.split())) if keep(s)]


def _strip_innermost(text: str, pattern: re.Pattern, repl) -> str:
    while True:
        text, count = pattern.subn(repl, text)
        if not count:
            return text


_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|(?:(?!\{\|)[\s\S])*?\|\}")
_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_EXTERNAL = re.compile(r"\[(?:https?:)?//[^\s\]]+(?: ([^\]]*))?\]")
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>[\s\S]*?</ref>", re.I)
_COMMENT = re.compile(r"<!--[\s\S]*?-->")
_TAG = re.compile(r"<[^>]+>")
_NAMESPACED = re.compile(r"^(?:file|image|category|media|wikipedia|wp|template|help|portal|[a-z]{2,3}(?:-[a-z]+)?):",
                         re.I)


def _link(match: re.Match) -> str:
    target = match.group(1)
    if _NAMESPACED.match(target):
        return ""
    return target.rsplit("|", 1)[-1]


def wiki_text_to_paragraphs(wikitext: str) -> list[str]:
    """The prose paragraphs of one page's wiki markup (headings, lists, tables, templates,
    references, files and categories removed; links replaced by their text)."""
    text = _COMMENT.sub("", wikitext)
    text = _REF.sub("", text)
    text = _strip_innermost(text, _TEMPLATE, "")
    text = _strip_innermost(text, _TABLE, "")
    text = _strip_innermost(text, _LINK, _link)
    text = _EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _TAG.sub("", text)
    text = text.replace("'''", "").replace("''", "")
    paragraphs = []
    for line in text.split("\n"):
        line = " ".join(line.split())
        if not line or line[0] in "=*#:;|!{}" or line.startswith("----"):
            continue
        line = _strip_innermost(_strip_innermost(html.unescape(line), _EMPTY_PARENS, ""), _PAREN_LEAD, "(")
        paragraphs.append(line)
    return paragraphs


def wiki_sentences(data: dict[str, bytes]) -> list[str]:
    root = ET.fromstring(bz2.decompress(data[WIKI_FILE]).decode("utf-8"))
    sentences = []
    for element in root.iter():
        text = element.text
        if not element.tag.endswith("}text") or not text or text.lstrip().upper().startswith("#REDIRECT"):
            continue
        for paragraph in wiki_text_to_paragraphs(text):
            sentences.extend(s for s in split_sentences(paragraph) if keep(s))
    return sentences


# --- the baselines -----------------------------------------------------------------------------


def _baseline(sentences: list[str], n_pairs: int, seed: int, threads: int | None,
              memory_gib: float) -> tuple[np.ndarray, float]:
    from rapidscore.bertscore import compute_baseline

    start = time.perf_counter()
    table = compute_baseline(sentences, MODEL, n_pairs=n_pairs, seed=seed, num_threads=threads,
                             memory_budget=int(memory_gib * 2**30))
    return table, time.perf_counter() - start


def _padding_effect(sentences: list[str], n_pairs: int, seed: int, threads: int | None) -> dict:
    """Mean P/R/F at every layer over the same random pairs, with and without bert-score's padding
    artefact (its batch of 64 pairs padded with zero vectors)."""
    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.baseline_maker import random_pairs

    pairs = random_pairs(len(sentences), n_pairs, seed)
    cands, refs = [sentences[i] for i in pairs[:, 0]], [sentences[j] for j in pairs[:, 1]]
    scorer = BERTScore(MODEL, all_layers=True, num_threads=threads)
    plain = scorer.score(cands, refs)
    padded = scorer.score(cands, refs, reference_batch_size=64)

    def means(result):
        return np.stack([result.precision.mean(axis=1, dtype=np.float64), result.recall.mean(axis=1, dtype=np.float64),
                         result.f1.mean(axis=1, dtype=np.float64)], axis=1)

    return {"pairs": n_pairs, "plain": means(plain).tolist(), "padded_64": means(padded).tolist(),
            "max_abs_difference": float(np.abs(means(padded) - means(plain)).max())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=PACKAGED)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/rapidscore/corpora")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--memory-gib", type=float, default=6.0,
                        help="token embeddings held at once (the whole corpus, every layer: 4.7 GiB); less "
                             "streams the pairs in chunks: the same numbers, at up to two sentence encodings "
                             "per pair instead of one per sentence")
    parser.add_argument("--check", action="store_true", help="also the corpus-sensitivity numbers")
    parser.add_argument("--sentences-out", type=Path, default=None, help="write the corpus sentences here")
    args = parser.parse_args()

    data = corpus_files(args.cache)
    news, wiki = sorted(set(lee_sentences(data))), sorted(set(wiki_sentences(data)))
    sentences = sorted(set(news) | set(wiki))
    print(f"{len(news)} news + {len(wiki)} Wikipedia = {len(sentences)} distinct sentences", file=sys.stderr)
    if args.sentences_out is not None:
        args.sentences_out.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    report: dict = {"model": MODEL, "gensim": GENSIM_VERSION, "pairs": args.pairs, "seed": args.seed,
                    "sentences": {"news": len(news), "wikipedia": len(wiki), "total": len(sentences)},
                    "words_per_sentence": float(np.mean([len(s.split(" ")) for s in sentences]))}
    from rapidscore.bertscore.baselines import write_baseline

    table, seconds = _baseline(sentences, args.pairs, args.seed, args.threads, args.memory_gib)
    write_baseline(args.out, table)
    print(f"wrote {args.out} in {seconds:.1f} s", file=sys.stderr)
    report.update(baseline=table.tolist(), seconds=seconds, out=str(args.out))
    if args.check:
        rng = np.random.default_rng(args.seed)
        order = rng.permutation(len(sentences))
        halves = [sorted(sentences[i] for i in order[: len(order) // 2]),
                  sorted(sentences[i] for i in order[len(order) // 2:])]
        checks = {}
        for name, part in (("half_a", halves[0]), ("half_b", halves[1]), ("news", news), ("wikipedia", wiki)):
            part_table, part_seconds = _baseline(part, args.pairs, args.seed, args.threads, args.memory_gib)
            checks[name] = {"sentences": len(part), "baseline": part_table.tolist(), "seconds": part_seconds,
                            "max_abs_difference_from_full": float(np.abs(part_table - table).max())}
            print(f"{name}: {len(part)} sentences, max |difference| from the full corpus "
                  f"{checks[name]['max_abs_difference_from_full']:.4f}", file=sys.stderr)
        halves_difference = np.abs(np.asarray(checks["half_a"]["baseline"]) - np.asarray(checks["half_b"]["baseline"]))
        checks["halves_max_abs_difference"] = float(halves_difference.max())
        checks["domains_max_abs_difference"] = float(np.abs(np.asarray(checks["news"]["baseline"])
                                                            - np.asarray(checks["wikipedia"]["baseline"])).max())
        checks["padding"] = _padding_effect(sentences, 5_000, args.seed, args.threads)
        report["checks"] = checks
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "minilm_baseline.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"# all-MiniLM-L6-v2 rescale baseline ({args.pairs} pairs, seed {args.seed})", "",
             f"Corpus: gensim {GENSIM_VERSION} data files, {len(news)} news + {len(wiki)} Wikipedia = "
             f"{len(sentences)} distinct sentences. {seconds:.0f} s on {os.cpu_count()} cores.", "",
             "| layer | P | R | F |", "|---|---|---|---|"]
    lines += [f"| {k} | {p:.4f} | {r:.4f} | {f:.4f} |" for k, (p, r, f) in enumerate(table)]
    if args.check:
        c = report["checks"]
        lines += ["", f"Two disjoint halves: max |difference| {c['halves_max_abs_difference']:.4f}; news alone vs "
                  f"Wikipedia alone: {c['domains_max_abs_difference']:.4f}; bert-score's padding (batch 64) vs "
                  f"none on {c['padding']['pairs']} pairs: {c['padding']['max_abs_difference']:.4f}."]
    (RESULTS / "minilm_baseline.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

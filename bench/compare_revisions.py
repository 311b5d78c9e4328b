"""The working tree against an earlier revision of rapidscore: the same numbers, the same outputs, the same speed.

A refactoring must change no number and slow nothing down, but ratios against bert-score move
with the machine (a shared machine whose GEMM rate drifts by 20% between days moves them more than
most code changes). This runs the same work with two builds of rapidscore, on the same machine in
the same minutes, and compares:

    python bench/compare_revisions.py --base-python /work/base-venv/bin/python --quick
    python bench/compare_revisions.py --base ff1c6da [--rounds 3] [--backends onnx,openvino,torch]

The base is either an interpreter that imports the base revision (``--base-python``: a virtual
environment over a checkout of it, the quick way) or a git revision built with pip into a
temporary directory (``--base``; the working tree's editable install is bypassed in its
processes). The working tree runs under this interpreter. Three parts, each on by default:

- ``--backends``: the numbers, one process per build and backend: sha256 of W1's P, R, F1
  (``BERTScore.score(..., reference_batch_size=64)``; on torch the first ``--torch-pairs``
  pairs, the same on both sides), of the NRR similarities and best references of 500 W1 pairs,
  and of the sentence set (``SentenceSimilarity.sentence_vectors`` of ``--sentences`` synthetic
  sentences, bench_sentence.py's set, and the similarities of consecutive pairs).
- ``--commands``: every command on examples/ (bertscore, nrr, ner, refusal, abstention's SELECT
  tables, rgb, report, compare; the ones with an encoder once per backend) run by both builds'
  CLIs in separate temporary directories holding a copy of examples/, and every output (stdout,
  stderr, exit status, each file written) compared byte for byte after ``normalise`` (what it
  rewrites and why is in INTENDED).
- ``--rounds``: speed, onnx: W1 (median of ``--w1-reps`` calls per process) and W4 (one short
  pair, p50 of 200 calls), one process per build per round, the order rotated; the ratio of each
  round's pair, so that load shared by both is divided out.

Exit status 1 if any digest or output differs. Writes bench/results/revisions.md and .json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

from rapidscore.testing import corpora

RESULTS = common.REPO_ROOT / "bench" / "results"
EXAMPLES = common.REPO_ROOT / "examples"
BACKENDS = ("onnx", "openvino", "torch")

# The head of every child: argv = [side ("base", "tree" or "site"), inputs JSON, ...]. A base
# built into a pip target dir ("site") is first on PYTHONPATH; the child drops the editable
# install's finder so that the build wins. The texts come from this tree (inputs JSON), so both
# builds score the same inputs.
PRELUDE = r"""
import hashlib, json, statistics, sys, time
side, inputs = sys.argv[1], sys.argv[2]
if side == "site":
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
with open(inputs, encoding="utf-8") as handle:
    texts = json.load(handle)
import rapidscore
from rapidscore.bertscore import BERTScore
from rapidscore.nrr import SentenceSimilarity
try:
    from rapidscore.encoder.model_source import embedded_model_dir
except ImportError:  # revisions before the encoder/ layout
    from rapidscore.model_source import embedded_model_dir
model = str(embedded_model_dir())
def sha(*arrays):
    return hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()
"""

# argv[3] = backend. The digests of one backend; one model session at a time.
NUMBERS_CHILD = PRELUDE + r"""
backend = sys.argv[3]
cands, refs = texts["w1"]
n = texts["torch_pairs"] if backend == "torch" else len(cands)
result = BERTScore(model, 6, backend=backend).score(cands[:n], refs[:n], reference_batch_size=64)
out = {"file": rapidscore.__file__, "backend": backend, "w1_pairs": n,
       "w1_scores_sha256": sha(result.precision, result.recall, result.f1)}
similarity = SentenceSimilarity(model, backend=backend)
sims, best = similarity.pairs(cands[:500], refs[:500])
out["w1_similarity_sha256"] = sha(sims, best)
sentences = texts["sentences"]
out["sentence_vectors_sha256"] = sha(similarity.sentence_vectors(sentences))
sims, best = similarity.pairs(sentences[0::2], sentences[1::2])
out["sentence_similarity_sha256"] = sha(sims, best)
print(json.dumps(out))
"""

# argv[3] = W1 calls. Timings only (onnx, the default backend); no second model session alive.
SPEED_CHILD = PRELUDE + r"""
reps = int(sys.argv[3])
cands, refs = texts["w1"]
scorer = BERTScore(model, 6)
scorer.score(cands[:64], refs[:64], reference_batch_size=64)
w1 = []
for _ in range(reps):
    start = time.perf_counter()
    scorer.score(cands, refs, reference_batch_size=64)
    w1.append(time.perf_counter() - start)
short_c, short_r = texts["w4"]
for _ in range(20):
    scorer.score([short_c[0]], [short_r[0]])
w4 = []
for k in range(200):
    start = time.perf_counter()
    scorer.score([short_c[k % 50]], [short_r[k % 50]])
    w4.append((time.perf_counter() - start) * 1000.0)
print(json.dumps({"file": rapidscore.__file__, "w1_s": statistics.median(w1), "w4_p50_ms": statistics.median(w4)}))
"""

# The CLI of a pip-built base: the editable finder dropped, as in PRELUDE.
CLI_SHIM = r"""
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.argv[0] = "rapidscore"
runpy.run_module("rapidscore", run_name="__main__", alter_sys=True)
"""

# Nothing in the outputs differs by run (no timings, dates or paths with -q and these
# commands: checked, and a new one would show as a difference). What normalise rewrites is each
# change the redesign or its sibling issues made on purpose, applied to both sides' outputs; the
# report names each with the commit that made it. (description, why, pattern, replacement)
INTENDED: list[tuple[str, str, re.Pattern[bytes], bytes]] = [
    ("the `references_sha256` key of `bertscore --json` and `nrr --json` is removed",
     "a digest of every item's references, added so that compare refuses systems scored against other "
     "references (issue 49, 6bae5eb)",
     re.compile(rb'"references_sha256": "[0-9a-f]{64}",\s*|,\s*"references_sha256": "[0-9a-f]{64}"'), b""),
    ("`+uniform` after the idf source in a signature is removed (`idf:yes+uniform` -> `idf:yes`)",
     "a result whose sentences fell back to uniform idf weights says so in its signature (issue 47, f6ebc0d); "
     "the weights themselves are unchanged",
     re.compile(rb"(idf:[^|\"\s]*?)\+uniform"), rb"\1"),
    ("in the report's HTML, the captions' `; the 95% bootstrap interval of ...` is removed, and the tree's "
     "page must hold every line of the base's page, in order and unchanged: what it adds is counted, not "
     "compared",
     "the report shows each system's bootstrap interval (new columns), a pairwise table against the baseline "
     "and an intervals figure (issue 49, 264aec2)",
     re.compile(rb"; the 95% bootstrap interval of the [^<]*"), b""),
]
ADDITIVE_SUFFIXES = (".html",)  # the files of the last INTENDED entry


def normalise(data: bytes, name: str = "") -> bytes:
    """``data`` (the output file ``name``) with each INTENDED change undone (the HTML one only in
    an .html file)."""
    for description, _, pattern, replacement in INTENDED:
        if "report's HTML" in description and not name.endswith(ADDITIVE_SUFFIXES):
            continue
        data = pattern.sub(replacement, data)
    return data


def html_lines(data: bytes) -> list[bytes]:
    """One element per line, as the diff of two pages reads best (the report writes long lines)."""
    return data.replace(b"><", b">\n<").splitlines()


def additions_only(base: bytes, tree: bytes) -> tuple[int, str | None]:
    """(lines the tree adds, None) when every line of ``base`` is in ``tree`` in order and
    unchanged; else (added, the first base line the tree changed or dropped)."""
    import difflib

    a, b = html_lines(base), html_lines(tree)
    added = 0
    for tag, i1, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "insert":
            added += j2 - j1
        elif tag != "equal":
            return added, f"line {i1 + 1}: {a[i1][:300].decode('utf-8', 'replace')}"
    return added, None


# --------------------------------------------------------------------------------------------
# The builds
# --------------------------------------------------------------------------------------------

class Build:
    """How to run one side: its python, the environment, the side tag the children read."""

    def __init__(self, name: str, python: str, side: str, package: str, site: str | None = None):
        # package: the folder its rapidscore must be imported from (checked on every child)
        self.name, self.python, self.side, self.package, self.site = name, python, side, package, site

    def env(self) -> dict[str, str]:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg",
                   SOURCE_DATE_EPOCH="0", PYTHONHASHSEED="0")
        env.pop("PYTHONPATH", None)
        if self.site:
            env["PYTHONPATH"] = self.site
        return env

    def child(self, script: str, *args: str, cwd: Path) -> dict:
        out = subprocess.run([self.python, "-c", script, self.side, *args], cwd=cwd, env=self.env(),
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{self.name} child failed ({out.returncode}):\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if not result["file"].startswith(self.package):
            raise RuntimeError(f"the {self.name} process imported {result['file']}, not the build in {self.package}")
        return result

    def cli(self) -> list[str]:
        if self.site:
            return [self.python, "-c", CLI_SHIM]
        return [self.python, "-m", "rapidscore"]


def pip_build(revision: str, into: Path) -> str:
    """pip-build ``revision`` of this repository into ``into``/site; returns the site dir."""
    tree = into / "tree"
    subprocess.run(["git", "-C", str(common.REPO_ROOT), "worktree", "add", "--detach", str(tree), revision],
                   check=True, capture_output=True)
    site = into / "site"
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(tree)],
                       check=True)
    finally:
        subprocess.run(["git", "-C", str(common.REPO_ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)
    return str(site)


def snapshot(revision: str, into: Path) -> str:
    """The python/ folder of ``revision`` (git archive, no worktree) with this interpreter's
    compiled extension copied in: the tree side as committed, whatever is being edited in the
    working tree meanwhile. Assumes csrc/ of ``revision`` is what the extension was built from."""
    import rapidscore._core as core

    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(common.REPO_ROOT), "archive", revision, "python"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    site = into / "python"
    shutil.copy2(core.__file__, site / "rapidscore" / Path(core.__file__).name)
    return str(site)


def package_of(python: str) -> Path:
    """The rapidscore package folder ``python`` imports."""
    out = subprocess.run([python, "-c", "import rapidscore; print(rapidscore.__file__)"], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=""), check=True)
    return Path(out.stdout.strip()).parent


def revision_of(package: Path) -> str:
    """The commit of the checkout holding ``package`` (+dirty with uncommitted changes)."""
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True)
    dirty = subprocess.run(["git", "-C", str(package), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty else "")


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------

DIGESTS = ("w1_scores_sha256", "w1_similarity_sha256", "sentence_vectors_sha256", "sentence_similarity_sha256")


def compare_numbers(builds: list[Build], backends: list[str], inputs: Path, cwd: Path) -> dict:
    per_backend = {}
    for backend in backends:
        runs = {}
        for build in builds:
            print(f"[numbers] {backend}: {build.name}", file=sys.stderr, flush=True)
            runs[build.name] = build.child(NUMBERS_CHILD, str(inputs), backend, cwd=cwd)
        equal = {key: len({r[key] for r in runs.values()}) == 1 for key in DIGESTS}
        per_backend[backend] = {"runs": runs, "equal": equal, "identical": all(equal.values()),
                                "w1_pairs": runs[builds[0].name]["w1_pairs"]}
    return per_backend


# --------------------------------------------------------------------------------------------
# Commands on examples/
# --------------------------------------------------------------------------------------------

def prepare_run_dir(run_dir: Path) -> None:
    """A copy of examples/ and the inputs derived from it (the same bytes for both builds):
    the report walkthrough's one-answer files (docs/report.md), a pairs JSONL of the BERTScore
    example, and the responses of the SELECT example as refusal and RGB inputs."""
    shutil.copytree(EXAMPLES, run_dir / "examples")
    cands = (EXAMPLES / "bertscore" / "candidates.txt").read_text(encoding="utf-8").splitlines()
    refs = (EXAMPLES / "bertscore" / "references.txt").read_text(encoding="utf-8").splitlines()
    run = run_dir / "run"
    run.mkdir()
    (run / "expected.txt").write_text(refs[0] + "\n", encoding="utf-8")
    for k, cand in enumerate(cands, 1):
        (run / f"answer{k}.txt").write_text(cand + "\n", encoding="utf-8")
    with open(run / "pairs.jsonl", "w", encoding="utf-8") as handle:
        for k, (cand, ref) in enumerate(zip(cands, refs)):
            handle.write(json.dumps({"id": k, "candidate": cand, "reference": ref}) + "\n")
    responses = []
    for path in sorted((EXAMPLES / "abstention" / "results").rglob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            tree = json.load(handle)
        for seed in tree.values():
            for concept in seed.values():
                for record in concept.values():
                    response = record["response"]
                    text = response["complete"] if isinstance(response, dict) else response
                    responses.append(text)
    responses = responses[:200]
    with open(run / "responses.jsonl", "w", encoding="utf-8") as handle:
        for k, text in enumerate(responses):
            handle.write(json.dumps({"id": k, "response": text}) + "\n")
    with open(run / "rgb.jsonl", "w", encoding="utf-8") as handle:
        for k, text in enumerate(responses):
            handle.write(json.dumps({"response": text, "noise_only": k % 3 != 0}) + "\n")


# --quick, on every backend but the first: each encoder path once (batch, streamed, idf, rescaled,
# NRR, NER labels, the embedding refusal detector) and the report that reads them.
QUICK_OTHER_BACKENDS = {"bertscore-idf-rescaled", "bertscore-stream-idf", "bertscore-answer1", "bertscore-answer2",
                        "bertscore-answer3", "nrr-json", "ner-json", "refusal-embedding", "report-examples"}


def command_list(backend: str, first: bool, quick: bool = False) -> list[tuple[str, list[str], str | None]]:
    """(name, arguments, stdout file or None) of every command on examples/ with ``backend``;
    the commands without an encoder only when ``first``; when not ``first`` and ``quick``, only
    QUICK_OTHER_BACKENDS. In order: later ones read earlier ones' outputs (the reports).
    (`rapidscore compare` is not in the list: 133c433 has no such command.)"""
    bk = ["--backend", backend]
    c, r = "examples/bertscore/candidates.txt", "examples/bertscore/references.txt"
    ner = ["ner", "--gold", "examples/ner/gold.jsonl", "--pred", "gliner=examples/ner/gliner.jsonl",
           "--pred", "deberta=examples/ner/deberta.jsonl", "--pred", "spacy=examples/ner/spacy.jsonl"]
    select = ["abstention", "examples/abstention/results", "--taxonomy", "examples/abstention/taxonomy.json"]
    commands: list[tuple[str, list[str], str | None]] = [
        ("bertscore", ["bertscore", "-c", c, "-r", r, *bk], None),
        ("bertscore-seg-table", ["bertscore", "-c", c, "-r", r, "-s", "--table", *bk], None),
        ("bertscore-json", ["bertscore", "-c", c, "-r", r, "--json", "-q", *bk], "bertscore.json"),
        ("bertscore-idf-rescaled", ["bertscore", "-c", c, "-r", r, "--idf", "--rescale_with_baseline", "--json",
                                    "-q", *bk], None),
        ("bertscore-stream", ["bertscore", "--input", "run/pairs.jsonl", "--output", "run/scores.jsonl", "-q",
                              *bk], None),
        ("bertscore-stream-idf", ["bertscore", "--input", "run/pairs.jsonl", "--output", "run/scores-idf.jsonl",
                                  "--idf", "--write-idf", "run/idf.json", "-q", *bk], None),
        ("bertscore-idf-file", ["bertscore", "-c", c, "-r", r, "--idf-file", "run/idf.json", "--json", "-q", *bk],
         None),
        *[(f"bertscore-answer{k}", ["bertscore", "-c", f"run/answer{k}.txt", "-r", "run/expected.txt", "--json",
                                    "-q", *bk], f"run/answer{k}.json") for k in (1, 2, 3)],
        ("nrr-table", ["nrr", "--generated", c, "--references", r, "--threshold", "0.8", "--table", *bk], None),
        ("nrr-json", ["nrr", "--generated", c, "--references", r, "--json", "-q", *bk], "run/nrr.json"),
        ("nrr-stream", ["nrr", "--input", "run/pairs.jsonl", "--generated-column", "candidate",
                        "--reference-column", "reference", "--output", "run/nrr.jsonl", "-q", *bk], None),
        ("ner", [*ner, *bk], None),
        ("ner-json", [*ner, "--json", "-q", *bk], "run/ner.json"),
        ("refusal-embedding", ["refusal", "--input", "run/responses.jsonl", "--output",
                               "run/decisions-embedding.jsonl", "--set", "method=embedding", "--set",
                               f"backend={backend}", "--json", "-q"], None),
        ("abstention-embedding", [*select, "--method", "embedding", "--recompute", "--format", "json", *bk], None),
        ("report-readme", ["report", "bertscore.json", "--candidates", c, "--references", r, "--out",
                           "report.html", "-q", *bk], None),
        ("report-examples", ["report", "run/answer1.json", "run/answer2.json", "run/answer3.json", "run/nrr.json",
                             "run/ner.json", "examples/abstention/results",
                             "--name", "run/answer1.json=metal", "--name", "run/answer2.json=jazz",
                             "--name", "run/answer3.json=outlaw",
                             "--name", "examples/abstention/results=select-example",
                             "--candidates", "metal=run/answer1.txt", "--candidates", "jazz=run/answer2.txt",
                             "--candidates", "outlaw=run/answer3.txt", "--candidates", f"nrr={c}",
                             "--references", r, "--gold", "examples/ner/gold.jsonl",
                             "--model", "sentence-transformers/all-MiniLM-L6-v2", "--out", "run/report.html", "-q",
                             *bk], None),
    ]
    if quick and not first:
        return [command for command in commands if command[0] in QUICK_OTHER_BACKENDS]
    if first:
        commands += [
            ("abstention-levels", [*select, "--levels"], None),
            ("abstention-markdown", [*select, "--format", "markdown"], None),
            ("abstention-latex", [*select, "--format", "latex", "-o", "run/select.tex"], None),
            ("abstention-csv", [*select, "--format", "csv"], None),
            ("abstention-json", [*select, "--json", "-q"], None),
            ("abstention-recompute", [*select, "--recompute", "--levels"], None),
            ("abstention-keyword", [*select, "--method", "keyword"], None),
            ("refusal", ["refusal", "--input", "run/responses.jsonl", "--output", "run/decisions.jsonl",
                         "--json", "-q"], None),
            ("refusal-keyword", ["refusal", "--input", "run/responses.jsonl", "--output",
                                 "run/decisions-keyword.jsonl", "--set", "method=keyword", "-q"], None),
            ("rgb", ["rgb", "run/rgb.jsonl", "--no-support-column", "noise_only"], None),
            ("rgb-json", ["rgb", "run/rgb.jsonl", "--no-support-column", "noise_only", "--json"], None),
        ]
    return commands


def run_commands(build: Build, run_dir: Path, backend: str, first: bool, quick: bool) -> list[dict]:
    """Runs the command list in ``run_dir``; each command's stdout, stderr and exit status are
    kept in ``run_dir``/cli/NAME.{out,err,rc}."""
    logs = run_dir / "cli"
    logs.mkdir(exist_ok=True)
    done = []
    for name, args, stdout_file in command_list(backend, first, quick):
        start = time.perf_counter()
        out = subprocess.run([*build.cli(), *args], cwd=run_dir, env=build.env(), capture_output=True)
        seconds = time.perf_counter() - start
        (logs / f"{name}.out").write_bytes(out.stdout)
        (logs / f"{name}.err").write_bytes(out.stderr)
        (logs / f"{name}.rc").write_text(f"{out.returncode}\n")
        if stdout_file:
            (run_dir / stdout_file).write_bytes(out.stdout)
        done.append({"name": name, "args": args, "returncode": out.returncode, "seconds": round(seconds, 2)})
    return done


def output_files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()
                  and p.relative_to(run_dir).parts[0] != "examples")


def compare_outputs(base_dir: Path, tree_dir: Path) -> tuple[list[dict], dict[str, int]]:
    """Every output file of both runs, normalised and compared (examples/ too: a command must
    not change its inputs); a difference names the file and its first differing line. Also the
    lines each .html file of the tree adds (INTENDED)."""
    files = sorted(set(output_files(base_dir)) | set(output_files(tree_dir)))
    differences, added = [], {}
    for name in files:
        a, b = base_dir / name, tree_dir / name
        if not a.exists() or not b.exists():
            differences.append({"file": name, "only_in": "base" if a.exists() else "tree"})
            continue
        na, nb = normalise(a.read_bytes(), name), normalise(b.read_bytes(), name)
        if na == nb:
            continue
        if name.endswith(ADDITIVE_SUFFIXES):
            added[name], problem = additions_only(na, nb)
            if problem:
                differences.append({"file": name, "changed": problem})
            continue
        la, lb = na.splitlines(), nb.splitlines()
        line = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        differences.append({"file": name, "line": line + 1,
                            "base": la[line][:300].decode("utf-8", "replace") if line < len(la) else None,
                            "tree": lb[line][:300].decode("utf-8", "replace") if line < len(lb) else None})
    for name in sorted({str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.is_file()}):
        original = (EXAMPLES / name).read_bytes()
        for side, where in (("base", base_dir), ("tree", tree_dir)):
            if (where / "examples" / name).read_bytes() != original:
                differences.append({"file": f"examples/{name}", "changed_by": side})
    return differences, added


def compare_commands(builds: list[Build], backends: list[str], tmp: Path, quick: bool) -> dict:
    per_backend = {}
    for i, backend in enumerate(backends):
        dirs = {}
        for build in builds:
            print(f"[commands] {backend}: {build.name}", file=sys.stderr, flush=True)
            run_dir = tmp / f"{build.name}-{backend}"
            prepare_run_dir(run_dir)
            dirs[build.name] = (run_dir, run_commands(build, run_dir, backend, i == 0, quick))
        (base_dir, base_runs), (tree_dir, tree_runs) = dirs["base"], dirs["tree"]
        failed = [r["name"] for r in base_runs + tree_runs if r["returncode"] != 0]
        differences, added = compare_outputs(base_dir, tree_dir)
        per_backend[backend] = {"commands": len(tree_runs), "files": len(output_files(tree_dir)),
                                "failed": sorted(set(failed)), "differences": differences, "html_added_lines": added,
                                "seconds": {"base": round(sum(r["seconds"] for r in base_runs), 1),
                                            "tree": round(sum(r["seconds"] for r in tree_runs), 1)},
                                "names": [r["name"] for r in tree_runs]}
    return per_backend


# --------------------------------------------------------------------------------------------
# Speed
# --------------------------------------------------------------------------------------------

def compare_speed(builds: list[Build], rounds: int, reps: int, inputs: Path, cwd: Path) -> dict:
    runs: dict[str, list[dict]] = {b.name: [] for b in builds}
    loads = []
    for round_ in range(rounds):
        order = builds if round_ % 2 == 0 else builds[::-1]
        for build in order:
            print(f"[speed round {round_ + 1}/{rounds}] {build.name}", file=sys.stderr, flush=True)
            loads.append(os.getloadavg()[0])
            runs[build.name].append(build.child(SPEED_CHILD, str(inputs), str(reps), cwd=cwd))

    def ratios(key: str) -> list[float]:  # base / tree per round: > 1 means the tree is faster
        return [b[key] / t[key] for b, t in zip(runs["base"], runs["tree"])]

    summary = {key: {"base": statistics.median(r[key] for r in runs["base"]),
                     "tree": statistics.median(r[key] for r in runs["tree"]),
                     "base_over_tree": statistics.median(ratios(key)),
                     "ratio_range": [min(ratios(key)), max(ratios(key))]} for key in ("w1_s", "w4_p50_ms")}
    return {"runs": runs, "summary": summary, "load_average_1min": [round(x, 2) for x in loads]}


# --------------------------------------------------------------------------------------------

def markdown(data: dict, command: str) -> str:
    lines = [f"## {data['commit']} against {data['base']}", "",
             f"{data['date']}, {common.machine_line(data['machine'])}. Tree: {data['tree_how']}. "
             f"Base: {data['base_how']}. Command: `{command}` ({data['seconds']:.0f} s).", ""]
    numbers = data.get("numbers")
    if numbers:
        lines += ["### Numbers (sha256 per backend, one process per build)", "",
                  "| backend | W1 pairs | W1 P, R, F1 | W1 similarities (500 pairs) | sentence vectors | "
                  "sentence similarities |", "|---|---:|---|---|---|---|"]
        for backend, entry in numbers.items():
            cells = [("equal " if entry["equal"][k] else "DIFFERENT ") + entry["runs"]["tree"][k][:12]
                     for k in DIGESTS]
            lines.append(f"| {backend} | {entry['w1_pairs']:,} | " + " | ".join(cells) + " |")
        lines += ["", f"Sentence set: {data['sentences']:,} sentences of 10-40 words (bench_sentence.py's, seed 5); "
                  "its similarities are those of consecutive pairs.", ""]
    commands = data.get("commands")
    if commands:
        lines += ["### Commands on examples/ (byte for byte after normalisation)", "",
                  "| backend | commands | files compared | differences | failed | seconds base / tree |",
                  "|---|---:|---:|---:|---|---|"]
        for backend, entry in commands.items():
            lines.append(f"| {backend} | {entry['commands']} | {entry['files']} | {len(entry['differences'])} | "
                         f"{', '.join(entry['failed']) or 'none'} | {entry['seconds']['base']} / "
                         f"{entry['seconds']['tree']} |")
        lines += ["", "Compared: stdout, stderr, exit status and every file each command wrote, byte for byte. "
                  "Normalised (the changes made on purpose, in both sides' outputs):", ""]
        lines += [f"- {what}: {why}." for what, why, _, _ in INTENDED]
        lines += [""]
        for backend, entry in commands.items():
            if entry["html_added_lines"]:
                lines.append(f"- {backend}: lines the tree's pages add: " + ", ".join(
                    f"{name} {count}" for name, count in entry["html_added_lines"].items()))
        lines += [""]
        for backend, entry in commands.items():
            for diff in entry["differences"]:
                lines.append(f"- {backend}: `{json.dumps(diff)}`")
        lines += [""] if any(entry["differences"] for entry in commands.values()) else []
    speed = data.get("speed")
    if speed:
        s = speed["summary"]
        lines += ["### Speed (onnx; each round one process per build, order rotated; base/tree > 1: the tree is "
                  "faster)", "",
                  "| workload | base | tree | base / tree (median of rounds) | range of rounds |",
                  "|---|---:|---:|---:|---|",
                  f"| W1 `BERTScore.score`, {data['w1_pairs']:,} MiniLM pairs, median of {data['w1_reps']} (s) | "
                  f"{s['w1_s']['base']:.2f} | {s['w1_s']['tree']:.2f} | {s['w1_s']['base_over_tree']:.2f} | "
                  f"{s['w1_s']['ratio_range'][0]:.2f}-{s['w1_s']['ratio_range'][1]:.2f} |",
                  f"| W4 one short pair, p50 of 200 (ms) | {s['w4_p50_ms']['base']:.2f} | {s['w4_p50_ms']['tree']:.2f} "
                  f"| {s['w4_p50_ms']['base_over_tree']:.2f} | {s['w4_p50_ms']['ratio_range'][0]:.2f}-"
                  f"{s['w4_p50_ms']['ratio_range'][1]:.2f} |", "",
                  f"Rounds: {data['rounds']}; 1-minute load average at each process start: "
                  f"{', '.join(str(x) for x in speed['load_average_1min'])}.", ""]
    lines += [f"Everything identical: {'yes' if data['identical'] else 'NO'}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--base", help="git revision to build with pip and compare the working tree with")
    which.add_argument("--base-python", help="an interpreter that imports the base revision (its own venv)")
    parser.add_argument("--tree-revision", help="compare this commit (e.g. HEAD) as committed instead of the working "
                        "tree: its python/ with the compiled extension of this interpreter's build")
    parser.add_argument("--quick", action="store_true",
                        help="under ~10 minutes on 2 quiet cores: 3 rounds of 1 W1 call, torch W1 on 200 pairs, "
                             "1,000 sentences, on openvino and torch the commands that the report reads")
    parser.add_argument("--backends", default="onnx,openvino,torch",
                        help="comma-separated backends of the digests and the commands ('' = none)")
    parser.add_argument("--no-numbers", dest="numbers", action="store_false", help="skip the digests")
    parser.add_argument("--no-commands", dest="commands", action="store_false", help="skip the commands")
    parser.add_argument("--keep", type=Path, help="copy the commands' run directories here (to read a difference)")
    parser.add_argument("--rounds", type=int, default=3, help="speed: alternating process pairs (0 = no timing)")
    parser.add_argument("--w1-pairs", type=int, default=2000)
    parser.add_argument("--w1-reps", type=int, default=3, help="speed: W1 calls per process (median)")
    parser.add_argument("--torch-pairs", type=int, default=500, help="W1 pairs scored on torch (both sides)")
    parser.add_argument("--sentences", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.quick:
        args.w1_reps, args.torch_pairs, args.sentences = 1, min(args.torch_pairs, 200), min(args.sentences, 1000)
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"--backends: unknown {', '.join(unknown)} (known: {', '.join(BACKENDS)})")

    started = time.time()
    with tempfile.TemporaryDirectory(prefix="rapidscore-revisions-") as name:
        tmp = Path(name)
        if args.tree_revision:
            site = snapshot(args.tree_revision, tmp / "tree-snapshot")
            tree = Build("tree", sys.executable, "site", package=site, site=site)
            tree_label = subprocess.run(["git", "-C", str(common.REPO_ROOT), "rev-parse", "--short",
                                         args.tree_revision], capture_output=True, text=True, check=True).stdout.strip()
            tree_how = f"{tree_label} as committed (git archive of python/, this build's extension)"
        else:
            package = package_of(sys.executable)
            tree = Build("tree", sys.executable, "tree", package=str(package))
            tree_label, tree_how = common.git_commit(), "the working tree"
        if args.base_python:
            package = package_of(args.base_python)
            base = Build("base", args.base_python, "base", package=str(package))
            base_label, base_how = revision_of(package), f"`{args.base_python}` (imports {package})"
        else:
            site = pip_build(args.base, tmp)
            base = Build("base", sys.executable, "site", package=site, site=site)
            base_label, base_how = args.base, "built with pip into a temporary directory"
        if os.path.realpath(base.package) == os.path.realpath(tree.package):
            parser.error(f"the base and the tree import the same package ({base.package})")
        builds = [base, tree]
        inputs = tmp / "inputs.json"
        inputs.write_text(json.dumps({"w1": corpora.w1_pairs(args.w1_pairs, seed=1),
                                      "w4": corpora.sentence_pairs(50, 10, 16, seed=4),
                                      "sentences": corpora.english_sentences(args.sentences, 10, 40, seed=5),
                                      "torch_pairs": args.torch_pairs}), encoding="utf-8")
        data: dict = {"date": common.now(), "machine": common.machine_info(), "commit": tree_label,
                      "tree_how": tree_how, "base": base_label, "base_how": base_how, "quick": args.quick,
                      "w1_pairs": args.w1_pairs, "w1_reps": args.w1_reps,
                      "sentences": args.sentences, "rounds": args.rounds,
                      "normalised": [[what, why] for what, why, _, _ in INTENDED]}
        work = tmp / "work"
        work.mkdir()
        if args.numbers and backends:
            data["numbers"] = compare_numbers(builds, backends, inputs, work)
        if args.commands and backends:
            data["commands"] = compare_commands(builds, backends, tmp, quick=args.quick)
            if args.keep:
                for run_dir in tmp.glob("*-*"):
                    if run_dir.name.startswith(("base-", "tree-")) and run_dir.name != "tree-snapshot":
                        shutil.copytree(run_dir, args.keep / run_dir.name, symlinks=True, dirs_exist_ok=True)
        if args.rounds:
            data["speed"] = compare_speed(builds, args.rounds, args.w1_reps, inputs, work)
    data["identical"] = (all(e["identical"] for e in data.get("numbers", {}).values())
                         and all(not e["differences"] and not e["failed"] for e in data.get("commands", {}).values()))
    data["seconds"] = round(time.time() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "revisions.json").write_text(json.dumps(data, indent=2) + "\n")
    text = markdown(data, "python bench/compare_revisions.py " + " ".join(sys.argv[1:] if argv is None else argv))
    (RESULTS / "revisions.md").write_text(text)
    print(text)
    return 0 if data["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())

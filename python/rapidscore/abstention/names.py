"""Display names of SELECT's model and technique folders, as a paper writes them
(``openai--azure--gpt-4o`` -> ``GPT-4o (Azure)``, ``prompt-simple`` -> ``Prompt (ZS)``):
table-driven (model families, hosting platforms, size and date tokens), with a user's name file
(:func:`load_names`) on top; :class:`Names` is what the tables and figures label rows with."""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field

_UPPER_TOKENS = {"it": "IT", "ai": "AI", "cot": "CoT", "llm": "LLM", "sft": "SFT", "dpo": "DPO", "rlhf": "RLHF",
                 "icl": "ICL", "rag": "RAG"}

# ---- display names: what a paper writes for a results folder name -------------------------------
# A folder is "[maker--][platform--]name" (SELECT: "openai--azure--gpt-4o", "google--gemma-2-2b-it").
# The maker is dropped (the family names it); a hosting platform is shown in parentheses, since
# the same model served elsewhere is another row; a maker is kept, in parentheses, only where two
# folders of one table would otherwise read the same (Names.model_labels).
PLATFORMS = {"azure": "Azure", "bedrock": "Bedrock", "vertex": "Vertex AI", "vertexai": "Vertex AI",
             "vertex-ai": "Vertex AI", "together": "Together", "togetherai": "Together", "openrouter": "OpenRouter",
             "groq": "Groq", "fireworks": "Fireworks", "deepinfra": "DeepInfra", "anyscale": "Anyscale",
             "ollama": "Ollama", "vllm": "vLLM"}

# Families: the name's first token (its letters; the rest, "2.5" of "qwen2.5", is kept) -> (the
# family as its maker writes it, style). Styles: "hf" keeps the hub's hyphens (Llama-3.1-8B-Instruct);
# "openai" is GPT-<version> then words (GPT-3.5 Turbo, GPT-4o mini); "product" joins words with
# spaces, versions as a.b (Claude 3.5 Sonnet, Gemini 1.5 Pro).
FAMILIES = {
    "gpt": ("GPT", "openai"), "chatgpt": ("ChatGPT", "openai"), "o": ("o", "openai"),
    "claude": ("Claude", "product"), "gemini": ("Gemini", "product"), "command": ("Command", "product"),
    "llama": ("Llama", "hf"), "codellama": ("CodeLlama", "hf"), "tinyllama": ("TinyLlama", "hf"),
    "mistral": ("Mistral", "hf"), "mixtral": ("Mixtral", "hf"), "ministral": ("Ministral", "hf"),
    "codestral": ("Codestral", "hf"), "qwen": ("Qwen", "hf"), "qwq": ("QwQ", "hf"), "gemma": ("Gemma", "hf"),
    "codegemma": ("CodeGemma", "hf"), "phi": ("Phi", "hf"), "falcon": ("Falcon", "hf"),
    "deepseek": ("DeepSeek", "hf"), "olmo": ("OLMo", "hf"), "yi": ("Yi", "hf"), "vicuna": ("Vicuna", "hf"),
    "zephyr": ("Zephyr", "hf"), "granite": ("Granite", "hf"), "smollm": ("SmolLM", "hf"),
    "starcoder": ("StarCoder", "hf"), "internlm": ("InternLM", "hf"), "chatglm": ("ChatGLM", "hf"),
    "glm": ("GLM", "hf"), "nemotron": ("Nemotron", "hf"), "aya": ("Aya", "hf"), "dbrx": ("DBRX", "hf"),
    "jamba": ("Jamba", "hf"), "pythia": ("Pythia", "hf"), "opt": ("OPT", "hf"), "bloom": ("BLOOM", "hf"),
    "bloomz": ("BLOOMZ", "hf"), "mpt": ("MPT", "hf"), "openchat": ("OpenChat", "hf"), "solar": ("SOLAR", "hf"),
    "wizardlm": ("WizardLM", "hf"), "hermes": ("Hermes", "hf"), "flan": ("Flan", "hf"), "t5": ("T5", "hf"),
}
# Name prefixes that repeat the maker: "meta-llama-3.1-8b-instruct" is Llama-3.1-8B-Instruct.
_REDUNDANT_PREFIXES = ("meta-",)
# Words of hub names (style "hf"), as the makers write them; None: dropped ("hf": weights format).
_HF_WORDS: dict[str, str | None] = {
    "instruct": "Instruct", "chat": "Chat", "it": "IT", "base": "Base", "hf": None, "sft": "SFT", "dpo": "DPO",
    "rlhf": "RLHF", "awq": "AWQ", "gptq": "GPTQ", "gguf": "GGUF", "fp8": "FP8", "fp16": "FP16", "bf16": "BF16",
    "int4": "INT4", "int8": "INT8", "moe": "MoE", "distill": "Distill", "coder": "Coder", "math": "Math",
    "vision": "Vision", "preview": "Preview",
}
# Words of OpenAI's names: capitalised unless listed here (lower-case as OpenAI writes them).
_OPENAI_LOWER = {"mini", "nano"}
_SIZE = re.compile(r"^\d+(\.\d+)?(x\d+(\.\d+)?)?[bm]$", re.IGNORECASE)  # 8b, 0.5b, 8x7b, 350m
_DATE = re.compile(r"^(20\d\d)-?([01]\d)-?([0-3]\d)$")  # 20240620 (and 2024-06-20 once rejoined)
_SNAPSHOT = re.compile(r"^\d{3,4}$")  # OpenAI's 0613, 1106, Gemini's 002


def _split_folder(folder: str) -> tuple[list[str], str]:
    """(maker and platform parts, model name) of a folder name."""
    parts = [p for p in folder.split("--") if p] or [folder]
    return parts[:-1], parts[-1]


def _join_dates(tokens: list[str]) -> list[str]:
    """``2024``, ``08``, ``06`` as one token ``2024-08-06`` (a date split by the name's hyphens)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if (i + 2 < len(tokens) and re.fullmatch(r"20\d\d", tokens[i]) and re.fullmatch(r"[01]\d", tokens[i + 1])
                and re.fullmatch(r"[0-3]\d", tokens[i + 2])):
            out.append("-".join(tokens[i:i + 3]))
            i += 3
        else:
            out.append(tokens[i])
            i += 1
    return out


def _family(token: str) -> tuple[str, str, str] | None:
    """(canonical family, rest of the token, style) of a name's first token, or None."""
    match = re.match(r"^([A-Za-z]+)(.*)$", token)
    if match is None:
        return None
    letters, rest = match.groups()
    entry = FAMILIES.get(letters.lower())
    if entry is None or (letters.lower() == "o" and not rest[:1].isdigit()):  # o1, o3: OpenAI's
        return None
    return entry[0], rest, entry[1]


def _size(token: str) -> str:
    return token[:-1] + token[-1].upper()  # 7b -> 7B, 8x7b -> 8x7B, 0.5b -> 0.5B


def _openai_name(family: str, rest: str, tokens: list[str], notes: list[str]) -> str:
    """GPT-4o, GPT-3.5 Turbo, GPT-4o mini; o1, o3-mini; snapshots (0613, dates) into ``notes``."""
    if family == "o":  # o1, o3-mini: OpenAI writes these lower-case and hyphenated
        return "-".join([family + rest] + [t.lower() for t in tokens])
    words = list(tokens)
    version = rest.lstrip("-")
    if not version and words and re.match(r"^\d", words[0]):
        version = words.pop(0)
    if version == "35":  # Azure's deployment name gpt-35-turbo
        version = "3.5"
    head = f"{family}-{version}" if version else family
    out = []
    for word in words:
        if _DATE.match(word) or _SNAPSHOT.match(word):
            notes.append(_date_text(word))
        elif re.match(r"^\d+k$", word, re.IGNORECASE):
            out.append(word.lower())  # context length: 32k, 16k
        else:
            out.append(word.lower() if word.lower() in _OPENAI_LOWER else word[:1].upper() + word[1:])
    return " ".join([head, *out])


def _date_text(token: str) -> str:
    match = _DATE.match(token)
    return "-".join(match.groups()) if match else token


def _product_name(family: str, rest: str, tokens: list[str], notes: list[str]) -> str:
    """Claude 3.5 Sonnet, Claude Sonnet 4, Gemini 1.5 Pro: words with spaces, versions a.b."""
    words, version = [family + rest], []
    for token in tokens + [""]:
        if token.isdigit() and len(token) <= 2:
            version.append(token)  # claude-3-5-sonnet: 3.5
            continue
        if version:
            words.append(".".join(version))
            version = []
        if not token:
            continue
        if _DATE.match(token):
            notes.append(_date_text(token))
        elif token.lower() == "latest":
            notes.append("latest")
        elif token[:1].isalpha():
            words.append(token[:1].upper() + token[1:])
        else:
            words.append(token)  # 1.5, 002
    return " ".join(words)


def _hf_name(first: str, tokens: list[str]) -> str:
    """Llama-3.1-8B-Instruct: the hub's hyphens, sizes in capitals, known words as written."""
    out = [first]
    for token in tokens:
        low = token.lower()
        if low in _HF_WORDS:
            word = _HF_WORDS[low]
            if word is not None:
                out.append(word)
        elif _SIZE.match(token):
            out.append(_size(token))
        else:
            out.append(token)
    return "-".join(out)


def display_model(folder: str) -> str:
    """What a paper writes for a results folder name: the maker dropped (a hosting platform in
    parentheses), the family as its maker writes it, sizes in capitals, Instruct/Chat/IT:
    ``openai--azure--gpt-4o`` -> ``GPT-4o (Azure)``, ``meta-llama--meta-llama-3.1-8b-instruct``
    -> ``Llama-3.1-8B-Instruct``, ``mistralai--mistral-7b-instruct-v0.3`` ->
    ``Mistral-7B-Instruct-v0.3``, ``google--gemma-2-2b-it`` -> ``Gemma-2-2B-IT``,
    ``anthropic--claude-3-5-sonnet-20240620`` -> ``Claude 3.5 Sonnet (2024-06-20)``. A name of no
    known family keeps its words, first letter capitalised, sizes in capitals (``acme--foo-13b-chat``
    -> ``Foo-13B-Chat``)."""
    prefixes, name = _split_folder(folder)
    notes = [PLATFORMS[p.lower()] for p in prefixes if p.lower() in PLATFORMS]
    text = name
    for prefix in _REDUNDANT_PREFIXES:
        if text.lower().startswith(prefix) and _family(text[len(prefix):].split("-", 1)[0]) is not None:
            text = text[len(prefix):]
    tokens = _join_dates([t for t in text.split("-") if t])
    if not tokens:
        return folder
    family = _family(tokens[0])
    if family is not None and family[2] == "openai":
        shown = _openai_name(family[0], family[1], tokens[1:], notes)
    elif family is not None and family[2] == "product":
        shown = _product_name(family[0], family[1], tokens[1:], notes)
    else:
        if family is not None:
            first = family[0] + family[1]
        elif _SIZE.match(tokens[0]):
            first = _size(tokens[0])
        elif tokens[0].lower() in _HF_WORDS and _HF_WORDS[tokens[0].lower()]:
            first = str(_HF_WORDS[tokens[0].lower()])
        else:
            first = tokens[0][:1].upper() + tokens[0][1:]
        shown = _hf_name(first, tokens[1:])
    # notes: dates first, then the platform ("GPT-4o (2024-08-06, Azure)")
    notes = [n for n in notes if n not in PLATFORMS.values()] + [n for n in notes if n in PLATFORMS.values()]
    return f"{shown} ({', '.join(notes)})" if notes else shown


def model_labels(folders, display=display_model) -> dict[str, str]:
    """``{folder: display name}`` for the models of one table, each label distinct: where two
    folders read the same, their makers are added in parentheses (``Llama-3.1-8B-Instruct
    (meta-llama)``), and where that is not enough, the folder names themselves."""
    folders = list(dict.fromkeys(folders))
    labels = {f: display(f) for f in folders}
    for _round in range(2):
        seen: dict[str, list[str]] = {}
        for folder, label in labels.items():
            seen.setdefault(label, []).append(folder)
        clashes = [group for group in seen.values() if len(group) > 1]
        if not clashes:
            break
        for group in clashes:
            for folder in group:
                makers = [p for p in _split_folder(folder)[0] if p.lower() not in PLATFORMS]
                if _round == 0 and makers:
                    label = labels[folder]
                    labels[folder] = (label[:-1] + f", {makers[0]})" if label.endswith(")")
                                      else f"{label} ({makers[0]})")
                else:
                    labels[folder] = folder
    return labels


# SELECT's techniques (its config/techniques.yaml): the short names of its own tables.
TECHNIQUES = {"prompt-simple": "Prompt (ZS)", "prompt_cot-few_shot": "Prompt (FS+CoT)",
              "steering-repe": "Act. Steering", "tuning-sft": "SFT", "tuning-sft-dpo": "SFT + DPO"}


def display_technique(folder: str) -> str:
    """A readable technique name: SELECT's own short names for its techniques
    (``prompt-simple`` -> ``Prompt (ZS)``, ``prompt_cot-few_shot`` -> ``Prompt (FS+CoT)``,
    ``steering-repe`` -> ``Act. Steering``, ``tuning-sft-dpo`` -> ``SFT + DPO``); any other:
    separators to spaces, the first letter capitalised, known abbreviations upper-cased
    (``prompt-cot`` -> ``Prompt CoT``, ``icl_few-shot`` -> ``ICL few shot``)."""
    if folder in TECHNIQUES:
        return TECHNIQUES[folder]
    words = folder.replace("_", " ").replace("-", " ").split()
    words = [_UPPER_TOKENS.get(w.lower(), w) for w in words]
    if words and words[0][:1].islower():
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words) or folder


def load_names(path: str | os.PathLike) -> dict[str, str]:
    """A name mapping file: JSON ``{"folder name": "display name"}`` (optionally split into
    ``{"models": {...}, "techniques": {...}}``) or a two-column CSV ``name,display``."""
    path = os.fspath(path)
    if path.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle) if row]
        if rows and [c.strip().lower() for c in rows[0][:2]] == ["name", "display"]:
            rows = rows[1:]
        bad = [i for i, row in enumerate(rows, start=1) if len(row) != 2]
        if bad:
            raise ValueError(f"{path}: line {bad[0]}: expected two columns name,display")
        return dict(rows)
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of names")
    merged: dict[str, str] = {}
    for key, value in data.items():
        if key in ("models", "techniques") and isinstance(value, dict):
            merged.update(value)
        elif isinstance(value, str):
            merged[key] = value
        else:
            raise ValueError(f"{path}: key {key!r}: expected a display name (str)")
    return merged


@dataclass(frozen=True)
class Names:
    """How models and techniques are shown: a mapping first, else derived (``derive=False``:
    folder names as they are)."""

    mapping: dict = field(default_factory=dict)
    derive: bool = True

    def model(self, name: str) -> str:
        return self.mapping.get(name) or (display_model(name) if self.derive else name)

    def technique(self, name: str) -> str:
        return self.mapping.get(name) or (display_technique(name) if self.derive else name)

    def model_labels(self, models) -> dict[str, str]:
        """``{folder: label}`` for the models of one table: :meth:`model`'s, each distinct (derived
        names that read the same get their makers, :func:`model_labels`)."""
        return model_labels(models, self.model) if self.derive else {m: self.model(m) for m in models}

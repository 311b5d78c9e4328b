"""Published defaults of BERTScore (bert-score 0.3.13): language -> model, model -> layer.

The layer per model is the one its authors tuned on WMT16 correlation data; these are facts
about the reference implementation, kept here so defaults match it without importing it.
"""

from __future__ import annotations

DEFAULT_MODEL_FOR_OTHER_LANGUAGES = "bert-base-multilingual-cased"
MODEL_FOR_LANGUAGE = {
    "en": "roberta-large",
    "zh": "bert-base-chinese",
    "tr": "dbmdz/bert-base-turkish-cased",
    "en-sci": "allenai/scibert_scivocab_uncased",
}

TUNED_LAYER = {
    'bert-base-uncased': 9,
    'bert-large-uncased': 18,
    'bert-base-cased-finetuned-mrpc': 9,
    'bert-base-multilingual-cased': 9,
    'bert-base-chinese': 8,
    'roberta-base': 10,
    'roberta-large': 17,
    'roberta-large-mnli': 19,
    'roberta-base-openai-detector': 7,
    'roberta-large-openai-detector': 15,
    'xlnet-base-cased': 5,
    'xlnet-large-cased': 7,
    'xlm-mlm-en-2048': 6,
    'xlm-mlm-100-1280': 10,
    'allenai/scibert_scivocab_uncased': 8,
    'allenai/scibert_scivocab_cased': 9,
    'nfliu/scibert_basevocab_uncased': 9,
    'distilroberta-base': 5,
    'distilbert-base-uncased': 5,
    'distilbert-base-uncased-distilled-squad': 4,
    'distilbert-base-multilingual-cased': 5,
    'albert-base-v1': 10,
    'albert-large-v1': 17,
    'albert-xlarge-v1': 16,
    'albert-xxlarge-v1': 8,
    'albert-base-v2': 9,
    'albert-large-v2': 14,
    'albert-xlarge-v2': 13,
    'albert-xxlarge-v2': 8,
    'xlm-roberta-base': 9,
    'xlm-roberta-large': 17,
    'google/electra-small-generator': 9,
    'google/electra-small-discriminator': 11,
    'google/electra-base-generator': 10,
    'google/electra-base-discriminator': 9,
    'google/electra-large-generator': 18,
    'google/electra-large-discriminator': 14,
    'google/bert_uncased_L-2_H-128_A-2': 1,
    'google/bert_uncased_L-2_H-256_A-4': 1,
    'google/bert_uncased_L-2_H-512_A-8': 1,
    'google/bert_uncased_L-2_H-768_A-12': 2,
    'google/bert_uncased_L-4_H-128_A-2': 3,
    'google/bert_uncased_L-4_H-256_A-4': 3,
    'google/bert_uncased_L-4_H-512_A-8': 3,
    'google/bert_uncased_L-4_H-768_A-12': 3,
    'google/bert_uncased_L-6_H-128_A-2': 5,
    'google/bert_uncased_L-6_H-256_A-4': 5,
    'google/bert_uncased_L-6_H-512_A-8': 5,
    'google/bert_uncased_L-6_H-768_A-12': 5,
    'google/bert_uncased_L-8_H-128_A-2': 7,
    'google/bert_uncased_L-8_H-256_A-4': 7,
    'google/bert_uncased_L-8_H-512_A-8': 6,
    'google/bert_uncased_L-8_H-768_A-12': 7,
    'google/bert_uncased_L-10_H-128_A-2': 8,
    'google/bert_uncased_L-10_H-256_A-4': 8,
    'google/bert_uncased_L-10_H-512_A-8': 9,
    'google/bert_uncased_L-10_H-768_A-12': 8,
    'google/bert_uncased_L-12_H-128_A-2': 10,
    'google/bert_uncased_L-12_H-256_A-4': 11,
    'google/bert_uncased_L-12_H-512_A-8': 10,
    'google/bert_uncased_L-12_H-768_A-12': 9,
    'amazon/bort': 0,
    'facebook/bart-base': 6,
    'facebook/bart-large': 10,
    'facebook/bart-large-cnn': 10,
    'facebook/bart-large-mnli': 11,
    'facebook/bart-large-xsum': 9,
    't5-small': 6,
    't5-base': 11,
    't5-large': 23,
    'vinai/bertweet-base': 9,
    'microsoft/deberta-base': 9,
    'microsoft/deberta-base-mnli': 9,
    'microsoft/deberta-large': 16,
    'microsoft/deberta-large-mnli': 18,
    'microsoft/deberta-xlarge': 18,
    'microsoft/deberta-xlarge-mnli': 40,
    'YituTech/conv-bert-base': 10,
    'YituTech/conv-bert-small': 10,
    'YituTech/conv-bert-medium-small': 9,
    'microsoft/mpnet-base': 8,
    'squeezebert/squeezebert-uncased': 9,
    'squeezebert/squeezebert-mnli': 9,
    'squeezebert/squeezebert-mnli-headless': 9,
    'tuner007/pegasus_paraphrase': 15,
    'google/pegasus-large': 8,
    'google/pegasus-xsum': 11,
    'sshleifer/tiny-mbart': 2,
    'facebook/mbart-large-cc25': 12,
    'facebook/mbart-large-50': 12,
    'facebook/mbart-large-en-ro': 12,
    'facebook/mbart-large-50-many-to-many-mmt': 12,
    'facebook/mbart-large-50-one-to-many-mmt': 12,
    'allenai/led-base-16384': 6,
    'facebook/blenderbot_small-90M': 7,
    'facebook/blenderbot-400M-distill': 2,
    'microsoft/prophetnet-large-uncased': 4,
    'microsoft/prophetnet-large-uncased-cnndm': 7,
    'SpanBERT/spanbert-base-cased': 8,
    'SpanBERT/spanbert-large-cased': 17,
    'microsoft/xprophetnet-large-wiki100-cased': 7,
    'ProsusAI/finbert': 10,
    'Vamsi/T5_Paraphrase_Paws': 12,
    'ramsrigouthamg/t5_paraphraser': 11,
    'microsoft/deberta-v2-xlarge': 10,
    'microsoft/deberta-v2-xlarge-mnli': 17,
    'microsoft/deberta-v2-xxlarge': 21,
    'microsoft/deberta-v2-xxlarge-mnli': 22,
    'allenai/longformer-base-4096': 7,
    'allenai/longformer-large-4096': 14,
    'allenai/longformer-large-4096-finetuned-triviaqa': 14,
    'zhiheng-huang/bert-base-uncased-embedding-relative-key': 4,
    'zhiheng-huang/bert-base-uncased-embedding-relative-key-query': 7,
    'zhiheng-huang/bert-large-uncased-whole-word-masking-embedding-relative-key-query': 19,
    'google/mt5-small': 8,
    'google/mt5-base': 11,
    'google/mt5-large': 19,
    'google/mt5-xl': 24,
    'google/bigbird-roberta-base': 10,
    'google/bigbird-roberta-large': 14,
    'google/bigbird-base-trivia-itc': 8,
    'princeton-nlp/unsup-simcse-bert-base-uncased': 10,
    'princeton-nlp/unsup-simcse-bert-large-uncased': 18,
    'princeton-nlp/unsup-simcse-roberta-base': 8,
    'princeton-nlp/unsup-simcse-roberta-large': 13,
    'princeton-nlp/sup-simcse-bert-base-uncased': 10,
    'princeton-nlp/sup-simcse-bert-large-uncased': 18,
    'princeton-nlp/sup-simcse-roberta-base': 10,
    'princeton-nlp/sup-simcse-roberta-large': 16,
    'dbmdz/bert-base-turkish-cased': 10,
    'dbmdz/distilbert-base-turkish-cased': 4,
    'google/byt5-small': 1,
    'google/byt5-base': 17,
    'google/byt5-large': 30,
    'microsoft/deberta-v3-xsmall': 10,
    'microsoft/deberta-v3-small': 4,
    'microsoft/deberta-v3-base': 9,
    'microsoft/mdeberta-v3-base': 10,
    'microsoft/deberta-v3-large': 12,
    'khalidalt/DeBERTa-v3-large-mnli': 18,
}


def model_for_language(lang: str) -> str:
    """The reference's model for a language code (any unlisted language gets multilingual BERT)."""
    if not isinstance(lang, str) or not lang.strip():
        raise ValueError(f"lang must be a language code such as 'en', got {lang!r}")
    return MODEL_FOR_LANGUAGE.get(lang.lower(), DEFAULT_MODEL_FOR_OTHER_LANGUAGES)


def describe_language(lang: str) -> str:
    """Whether bert-score knows ``lang`` (a model of its own, or a published baseline) and the
    model it picks, in words: a missing model is then explained by the language, not only by the
    model's name."""
    from rapidscore.bertscore.baselines import available_baselines

    code = lang.lower()
    model = model_for_language(lang)
    if code in MODEL_FOR_LANGUAGE:
        return f"--lang {lang!r}: bert-score's model for it is {model}"
    baseline_languages = sorted({language for language, _model in available_baselines()})
    if code in baseline_languages:
        return (f"--lang {lang!r}: bert-score's model for it is {model} (its model for every language but "
                f"{', '.join(sorted(MODEL_FOR_LANGUAGE))})")
    return (f"--lang {lang!r} is not a language bert-score has a model or a baseline for (models: "
            f"{', '.join(sorted(MODEL_FOR_LANGUAGE))}; baselines: {', '.join(baseline_languages)}); like "
            f"bert-score, rapidscore gives any other code {model}")


def tuned_layer(model: str) -> int | None:
    """The reference's default layer for a model name, or None when it has none."""
    return TUNED_LAYER.get(model)

r"""Trains an ALBERT SentencePiece tokenizer (pad=0, unk=1, [CLS]=2, [SEP]=3, [MASK]=4).

  python -m pretrain.tokenizer --input corpus.txt --vocab_size 30000 --out data/tokenizer
  python -m pretrain.tokenizer --input zh.jsonl --format jsonl --character_coverage 0.9995 \
      --vocab_size 21128 --out data/tokenizer
  python -m pretrain.tokenizer --config configs/pretrain/cpu_small.py   # inputs/out from config

The output directory holds ``spiece.model``, ``spiece.vocab`` and ``tokenizer.json`` (the
encode-time settings); ``SentencePieceTokenizer.to_bytes()`` gives the model for a checkpoint.
"""

from __future__ import annotations

import json

from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli
from albert_jax.data.pretraining import corpus
from albert_jax.data.pretraining.documents import INPUT_FORMATS
from albert_jax.data.pretraining.pipeline import resolve_paths
from albert_jax.text.tokenization import train_sentencepiece

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (uses config.data).")
_INPUT = flags.DEFINE_list("input", None, "Input files (comma-separated or repeated).")
_FORMAT = flags.DEFINE_enum("format", None, list(INPUT_FORMATS), "Input format.")
_TEXT_FIELD = flags.DEFINE_string("text_field", None, "JSONL/TFDS text field.")
_VOCAB = flags.DEFINE_integer("vocab_size", None, "Vocabulary size.")
_OUT = flags.DEFINE_string("out", None, "Output directory.")
_COVERAGE = flags.DEFINE_float("character_coverage", None, "0.9995 for Chinese, 1.0 English.")
_LOWER = flags.DEFINE_boolean("lower_case", None, "Lower-case text before encoding.")
_MODE = flags.DEFINE_enum(
    "mode", None, ["transformers", "reference"], "SentencePiece encoding (tokenization.py)."
)
_MODEL_TYPE = flags.DEFINE_enum(
    "model_type", None, ["unigram", "bpe", "char"], "spm model type (default: data.tokenizer_type)."
)
_MAX_SENT = flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled by spm.")
_THREADS = flags.DEFINE_integer("num_threads", 2, "Training threads.")
_HARD_LIMIT = flags.DEFINE_boolean(
    "hard_vocab_limit", None, "False: stop below --vocab_size when the corpus is too small."
)


def _pick(flag_value, config_value, default=None):
    if flag_value is not None:
        return flag_value
    return config_value if config_value is not None else default


def main(argv):
    del argv
    d = resolve_paths(_CONFIG.value.data) if _CONFIG.value is not None else None
    get = (lambda k: d.get(k)) if d is not None else (lambda k: None)
    inputs = _pick(_INPUT.value, get("input_files"))
    fmt = _pick(_FORMAT.value, get("input_format"), "text")
    vocab = _pick(_VOCAB.value, get("vocab_size"))
    out = _pick(_OUT.value, get("tokenizer_dir"))
    if not inputs and fmt != "tfds":
        raise app.UsageError("--input (or --config) is required")
    if not vocab or not out:
        raise app.UsageError("--vocab_size and --out (or --config) are required")
    stats = corpus.CorpusStats()
    docs = corpus.read_documents(
        list(inputs or []),
        fmt,
        text_field=_pick(_TEXT_FIELD.value, get("text_field"), "text"),
        stats=stats,
        on_invalid_utf8=get("on_invalid_utf8") or "skip",
        tfds_name=get("tfds_name") or "",
        tfds_split=get("tfds_split") or "train",
        tfds_data_dir=get("tfds_data_dir") or None,
    )
    counts = {"documents": 0, "sentences": 0}

    def sentences():
        for doc in docs:
            counts["documents"] += 1
            counts["sentences"] += len(doc)
            yield from doc

    tok = train_sentencepiece(
        sentences(),
        out,
        vocab_size=int(vocab),
        character_coverage=float(_pick(_COVERAGE.value, get("character_coverage"), 0.9995)),
        lower_case=bool(_pick(_LOWER.value, get("lower_case"), True)),
        mode=_pick(_MODE.value, get("tokenizer_mode"), "transformers"),
        model_type=_pick(_MODEL_TYPE.value, get("tokenizer_type"), "unigram"),
        input_sentence_size=_MAX_SENT.value,
        num_threads=_THREADS.value,
        hard_vocab_limit=bool(_pick(_HARD_LIMIT.value, get("hard_vocab_limit"), True)),
    )
    read = {
        "lines": stats.lines,
        "invalid_utf8_lines": stats.invalid_utf8_lines,
        **counts,
    }
    print(json.dumps({"out": out, **tok.meta(), "input": read}))


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

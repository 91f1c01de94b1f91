r"""Tokenizes a corpus once into a TFDS ArrayRecord dataset (no TensorFlow needed).

  python -m pretrain.prepare_data --config configs/pretrain/cpu_small.py
  python -m pretrain.prepare_data --config configs/pretrain/cpu_small.py \
      --config.data.input_format=jsonl --config.data.input_files=a.jsonl,b.jsonl \
      --config.data.corpus_name=my_corpus --config.data.tokenizer_dir=my_corpus_tokenizer

Trains the tokenizer first if ``data.tokenizer_dir`` has none (``--train_tokenizer``), or copies
``data.tokenizer_model``; checks it for the special symbols and against ``data.vocab_size``, then
builds the corpus unless it is already on disk. Two corpora in one data directory need their own
``tokenizer_dir`` (or one shared ``tokenizer_model``): a tokenizer trained on other inputs is
refused, not reused. Prints a JSON summary with the build statistics (documents, sentences,
skipped undecodable lines, empty documents, one-sentence documents, cut sentences), after a
warning on stderr when most documents are one sentence (degenerate SOP/NSP pairs).
"""

from __future__ import annotations

import json
import sys

from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli
from albert_jax.data.pretraining import corpus
from albert_jax.data.pretraining.pair_check import pair_warning
from albert_jax.data.pretraining.pipeline import resolve_paths
from albert_jax.tasks.pretrain_config import PretrainConfig

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (uses config.data).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Base for relative paths (default: cwd).")
_TRAIN_TOK = flags.DEFINE_boolean("train_tokenizer", True, "Train a tokenizer if missing.")


def main(argv):
    del argv
    if _CONFIG.value is None:
        raise app.UsageError("--config is required")
    d = resolve_paths(_CONFIG.value.data, _WORKDIR.value)
    summary = corpus.build(d, _TRAIN_TOK.value)
    warning = pair_warning(PretrainConfig.from_config(_CONFIG.value).sentence_head, d)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    print(json.dumps(summary))


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

"""The People's Daily corpus of the data tests: its sentences, and its SentencePiece model and
tokenized corpus built in a temporary directory (once per session, by the `pd_data` fixture of
tests/conftest.py)."""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from albert_jax.configs.pretrain import common  # noqa: E402

TEST_VOCAB = 4000


def peoples_daily_sentences(limit: int | None = None) -> list[str]:
    from albert_jax.data.pretraining import corpus

    docs = corpus.read_documents([common.peoples_daily_path()], "tagged")
    out = [s for doc in docs for s in doc]
    return out[:limit] if limit else out


def build(tmp_path_factory):
    """(resolved data ConfigDict, build stats) of the corpus built under a new temporary
    directory."""
    from albert_jax.data.pretraining import corpus, pipeline
    from albert_jax.text.tokenization import train_sentencepiece

    root = tmp_path_factory.mktemp("albert_data")
    d = common.get_data_config()
    d.data_dir = str(root)
    d.vocab_size = TEST_VOCAB
    d.worker_count = 0
    d = pipeline.resolve_paths(d)
    train_sentencepiece(
        peoples_daily_sentences(),
        d.tokenizer_dir,
        vocab_size=TEST_VOCAB,
        character_coverage=0.9995,
        input_sentence_size=10000,
        seed_sentencepiece_size=100_000,
    )
    stats = corpus.prepare(d)
    return d, stats

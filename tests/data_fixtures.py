"""Shared fixtures for the data tests (imported by the test modules; conftest.py is not ours).

The SentencePiece model and the tokenized People's Daily corpus are built once per session and
cached at module level, so importing these fixtures into several modules still builds once.
"""

from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from configs.pretrain import common  # noqa: E402

TEST_VOCAB = 4000
_CACHE: dict = {}
__all__ = ["pd_config", "pd_data", "pd_tokenizer"]


def peoples_daily_sentences(limit: int | None = None) -> list[str]:
    from albert_jax.data import corpus

    docs = corpus.read_documents([common.peoples_daily_path()], "tagged")
    out = [s for doc in docs for s in doc]
    return out[:limit] if limit else out


def _build(tmp_path_factory):
    if "data" in _CACHE:
        return _CACHE["data"]
    from albert_jax.data import corpus, pipeline
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
    _CACHE["data"] = (d, stats)
    return _CACHE["data"]


@pytest.fixture(scope="session")
def pd_data(tmp_path_factory):
    """(resolved data ConfigDict, build stats) for the People's Daily corpus."""
    return _build(tmp_path_factory)


@pytest.fixture(scope="session")
def pd_config(pd_data):
    return pd_data[0]


@pytest.fixture(scope="session")
def pd_tokenizer(pd_config):
    from albert_jax.text.tokenization import SentencePieceTokenizer

    return SentencePieceTokenizer.from_dir(pd_config.tokenizer_dir)

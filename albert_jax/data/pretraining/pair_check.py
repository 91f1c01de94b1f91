"""Warns when the SOP / NSP sentence pairs a corpus gives are degenerate.

With the reference's ``single_segment='random_doc'``, a chunk of one sentence always gets a
random other document's text as ``B`` and label 1. On a corpus of mostly one-sentence documents
(text without sentence punctuation, one line per document) nearly every pair is such a chunk: the
sentence head learns "different topic -> 1" and reports ~100 % accuracy while learning nothing
about order. ``single_segment='split'`` cuts a one-sentence chunk in two instead.
``pair_warning`` is the one check that ``pretrain.prepare_data``, ``pretrain.inspect_data`` and
the pretraining start (``python -m pretrain``) print.
"""

from __future__ import annotations

import numpy as np

from albert_jax.data.pretraining import corpus
from albert_jax.data.pretraining.config import DataConfig

FIX = "--config.data.single_segment=split"
RATE_LIMIT = 0.9  # label-1 or random-document share of pairs above this: degenerate
ONE_SENTENCE_LIMIT = 0.5  # "most documents are one sentence"
SAMPLE_DOCUMENTS = 1000


def sentence_counts(data_config, n: int = SAMPLE_DOCUMENTS) -> list[int]:
    """Sentences per document of the built corpus's first `n` stored documents (the store keeps
    a key-hashed shuffled order, so these are a sample of the whole corpus)."""
    source = corpus.open_source(data_config)
    count = min(n, len(source))
    return [len(source[i]["sentence_lengths"]) for i in range(count)]


def pair_warning(
    sentence_head: bool,
    data_config,
    label_rate: float | None = None,
    random_doc_rate: float | None = None,
) -> str | None:
    """One line naming the fix when the pairs of `data_config` (built, paths resolved) are
    degenerate, else None. `sentence_head`: whether the run trains a sentence head on the pairs
    (`PretrainConfig.sentence_head` of `albert_jax.tasks.pretrain_config`; without one the pairs
    do not matter). The built corpus's sampled sentence counts are always checked; `label_rate`
    and `random_doc_rate` (of generated pairs, as `pretrain.inspect_data` measures) when given."""
    if not sentence_head:
        return None
    if DataConfig.from_config(data_config).single_segment == "split":
        return None  # one-sentence chunks are already cut in two
    reasons = []
    if label_rate is not None and label_rate > RATE_LIMIT:
        reasons.append(f"label-1 rate {label_rate:.2f}")
    if random_doc_rate is not None and random_doc_rate > RATE_LIMIT:
        reasons.append(f"random-document B in {random_doc_rate:.0%} of pairs")
    counts = np.asarray(sentence_counts(data_config))
    ones = int(np.sum(counts <= 1))
    if counts.size and ones / counts.size > ONE_SENTENCE_LIMIT:
        reasons.append(f"{ones} of {counts.size} sampled documents are one sentence")
    if not reasons:
        return None
    return (
        f"warning: degenerate sentence pairs ({', '.join(reasons)}): one-sentence chunks get a "
        f"random document's text as B and label 1, so SOP/NSP accuracy near 1 means nothing; "
        f"use {FIX}"
    )

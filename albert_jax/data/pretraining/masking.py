"""Whole-word n-gram masking (reference ``create_masked_lm_predictions``, GA l.426), in NumPy.

1. Word units over the non-special tokens: a token whose ``token_boundary`` flag is off joins the
   previous word (specials are skipped, so words are contiguous in the candidate list, not
   necessarily in positions: as in the reference an n-gram may span the middle ``[SEP]``).
2. Budget ``min(max_predictions, max(1, round(len * masked_lm_prob)))`` (Python's ``round``, and
   ``len`` counts the special tokens, as in the reference).
3. Candidates: every word index, in a random order; each gets a length ``n`` drawn with
   ``p(n) ∝ 1/n`` for ``n <= ngram`` (reversed when ``favor_shorter_ngram`` is off), cut at the
   last word. While the span would exceed the budget, ``n`` shrinks; if one word still exceeds
   it, the candidate is skipped; a span touching an already masked word is skipped (no retry).
   Stop once the budget is reached.
4. Each selected token: 80% ``[MASK]``, else 50/50 kept / uniform random id over the vocab.

Differences from the reference, on purpose: the n draws come from the seeded generator (the
reference uses NumPy's unseeded global RNG), and they are drawn for all candidates up front in one
vectorised call; the i.i.d. draws give the same distribution. The per-candidate loop stays in
Python because acceptance depends on earlier acceptances, but it only touches Python ints
(typically a few dozen iterations), and everything around it is vectorised.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from albert_jax.text.tokenization import MASK_ID


def ngram_probs(ngram: int, favor_shorter_ngram: bool = True) -> np.ndarray:
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    p = 1.0 / np.arange(1, ngram + 1)
    if not favor_shorter_ngram:
        p = p[::-1]
    return p / p.sum()


def num_to_predict(length: int, max_predictions: int, masked_lm_prob: float) -> int:
    return min(max_predictions, max(1, int(round(length * masked_lm_prob))))


@dataclasses.dataclass
class MaskResult:
    input_ids: np.ndarray  # int32 [len], tokens after replacement
    positions: np.ndarray  # int32 [k], sorted
    labels: np.ndarray  # int32 [k], original ids
    span_words: np.ndarray  # int32 [spans], length in words of each accepted span
    budget: int


def mask_tokens(
    tokens: np.ndarray,
    token_boundary: np.ndarray,
    special: np.ndarray,
    rng: np.random.Generator,
    *,
    vocab_size: int,
    max_predictions: int,
    masked_lm_prob: float = 0.15,
    ngram: int = 3,
    favor_shorter_ngram: bool = True,
    probs: np.ndarray | None = None,
    mask_id: int = MASK_ID,
) -> MaskResult:
    """Masks one sequence. ``special``: bool mask of [CLS]/[SEP]/pad positions (never masked)."""
    tokens = np.asarray(tokens, np.int32)
    length = len(tokens)
    budget = num_to_predict(length, max_predictions, masked_lm_prob)
    cand = np.flatnonzero(~np.asarray(special, np.bool_))
    n_cand = len(cand)
    if n_cand == 0:
        empty = np.zeros((0,), np.int32)
        return MaskResult(tokens.copy(), empty, empty, empty, budget)
    is_start = np.asarray(token_boundary, np.bool_)[cand]
    is_start[0] = True
    word_of = np.cumsum(is_start) - 1  # word index of each candidate token
    word_begin = np.flatnonzero(is_start)
    n_words = len(word_begin)
    bounds = word_begin.tolist()
    bounds.append(n_cand)  # word w = cand[bounds[w]:bounds[w+1]]

    if probs is None:
        probs = ngram_probs(ngram, favor_shorter_ngram)
    cdf = np.cumsum(probs)
    cdf[-1] = 1.0
    order = rng.permutation(n_words).tolist()
    ns = (np.searchsorted(cdf, rng.random(n_words), side="right") + 1).tolist()

    covered = bytearray(n_words)
    count = 0
    span_words: list[int] = []
    for s, n in zip(order, ns, strict=True):
        if count >= budget:
            break
        if n > n_words - s:
            n = n_words - s
        size = bounds[s + n] - bounds[s]
        while count + size > budget and n > 1:
            n -= 1
            size = bounds[s + n] - bounds[s]
        if count + size > budget or any(covered[s : s + n]):
            continue
        covered[s : s + n] = b"\x01" * n
        count += size
        span_words.append(n)

    selected = np.frombuffer(bytes(covered), np.bool_)[word_of]
    pos = cand[selected].astype(np.int32)  # sorted: cand is increasing
    labels = tokens[pos]
    k = len(pos)
    r = rng.random(2 * k)
    random_ids = rng.integers(0, vocab_size, size=k, dtype=np.int32)
    new = np.where(r[:k] < 0.8, np.int32(mask_id), np.where(r[k:] < 0.5, labels, random_ids))
    out = tokens.copy()
    out[pos] = new
    return MaskResult(out, pos, labels, np.asarray(span_words, np.int32), budget)

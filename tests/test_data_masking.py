"""Whole-word n-gram masking: budget, whole words, no overlaps, n-gram law, 80/10/10.

Statistical checks use 5 binomial standard errors. The accepted-span distribution is not exactly
6/11, 3/11, 2/11 (spans shrink at the budget and collide), so it is compared against a plain,
list-based transcription of the reference loop run on the same inputs (two-sample test).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from support.masking import reference_spans, two_sample_close

from albert_jax.data.pretraining import masking
from albert_jax.text.tokenization import MASK_ID

V = 1000


def _sequence(rng, length, p_start=0.7):
    """[CLS] A [SEP] B [SEP] with random ids and word starts."""
    toks = rng.integers(5, V, size=length).astype(np.int32)
    la = int(rng.integers(1, length - 3))
    toks[0], toks[la + 1], toks[-1] = 2, 3, 3
    special = np.zeros(length, np.bool_)
    special[[0, la + 1, length - 1]] = True
    starts = rng.random(length) < p_start
    starts[special] = True
    return toks, starts, special


def _mask(toks, starts, special, seed, maxp=20, **kw):
    rng = np.random.default_rng(seed)
    return masking.mask_tokens(
        toks, starts, special, rng, vocab_size=V, max_predictions=maxp, masked_lm_prob=0.15, **kw
    )


def test_ngram_probs():
    np.testing.assert_allclose(masking.ngram_probs(3), [6 / 11, 3 / 11, 2 / 11])
    np.testing.assert_allclose(masking.ngram_probs(3, False), [2 / 11, 3 / 11, 6 / 11])
    assert masking.num_to_predict(128, 20, 0.15) == 19
    assert masking.num_to_predict(512, 20, 0.15) == 20
    assert masking.num_to_predict(512, 77, 0.15) == 77
    assert masking.num_to_predict(3, 20, 0.15) == 1
    assert masking.num_to_predict(130, 100, 0.15) == 20  # Python round: 19.5 -> 20
    assert masking.num_to_predict(110, 100, 0.15) == 16  # 16.5 -> 16 (banker's rounding)


@pytest.mark.parametrize("length,maxp", [(128, 20), (512, 20), (512, 77), (9, 20)])
def test_structure_budget_whole_words(length, maxp):
    rng = np.random.default_rng(length + maxp)
    for seed in range(200):
        toks, starts, special = _sequence(rng, length)
        m = _mask(toks, starts, special, seed, maxp)
        pos = m.positions
        assert m.budget == masking.num_to_predict(length, maxp, 0.15)
        assert len(pos) <= m.budget
        assert np.all(np.diff(pos) > 0), "positions sorted and unique"
        assert not special[pos].any(), "never masks [CLS]/[SEP]"
        np.testing.assert_array_equal(m.labels, toks[pos])
        unmasked = np.setdiff1d(np.arange(length), pos)
        np.testing.assert_array_equal(m.input_ids[unmasked], toks[unmasked])
        # Whole words: a token is masked iff the other tokens of its word are.
        word = np.cumsum(starts | special)
        sel = np.zeros(length, np.bool_)
        sel[pos] = True
        for w in np.unique(word[pos]):
            members = (word == w) & ~special
            assert sel[members].all()
        assert m.span_words.sum() <= len(pos)


def test_single_token_words_always_fill_the_budget():
    rng = np.random.default_rng(1)
    for seed in range(300):
        length = int(rng.integers(5, 600))
        toks, _, special = _sequence(rng, length)
        m = _mask(toks, np.ones(length, np.bool_), special, seed, 77)
        assert len(m.positions) == m.budget


def test_deterministic_per_seed():
    rng = np.random.default_rng(2)
    toks, starts, special = _sequence(rng, 200)
    a, b = _mask(toks, starts, special, 7), _mask(toks, starts, special, 7)
    np.testing.assert_array_equal(a.input_ids, b.input_ids)
    np.testing.assert_array_equal(a.positions, b.positions)
    c = _mask(toks, starts, special, 8)
    assert not np.array_equal(a.positions, c.positions)


@pytest.mark.parametrize("favor_shorter", [True, False])
def test_span_lengths_match_reference_loop(favor_shorter):
    probs = masking.ngram_probs(3, favor_shorter)
    rng = np.random.default_rng(3)
    rnd = random.Random(3)
    ours, ref = np.zeros(4, int), np.zeros(4, int)
    masked_ours = masked_ref = 0
    for seed in range(1500):
        toks, starts, special = _sequence(rng, 128)
        m = _mask(toks, starts, special, seed, 20, favor_shorter_ngram=favor_shorter)
        ours += np.bincount(m.span_words, minlength=4)
        masked_ours += len(m.positions)
        pos, spans = reference_spans(starts, special, m.budget, rnd, probs)
        ref += np.bincount(spans, minlength=4)
        masked_ref += len(pos)
    two_sample_close(ours[1:], ref[1:])
    assert abs(masked_ours - masked_ref) / masked_ref < 0.01
    # Without budget/overlap effects the law is p(n) ∝ 1/n; accepted spans lean shorter.
    frac = ours[1:] / ours[1:].sum()
    if favor_shorter:
        assert frac[0] > frac[1] > frac[2]
    else:
        assert frac[2] > probs[0]


def test_span_law_without_interference():
    """Long sequences, tiny budget share: accepted spans follow 6/11, 3/11, 2/11 except at the
    budget edge, so count only spans accepted while >= 3 predictions remained."""
    counts = np.zeros(3)
    rng = np.random.default_rng(4)
    for seed in range(600):
        length = 2000
        toks, _, special = _sequence(rng, length)
        starts = np.ones(length, np.bool_)
        m = _mask(toks, starts, special, seed, 60)
        used = np.concatenate([[0], np.cumsum(m.span_words)])
        room = m.budget - used[:-1]
        for n in m.span_words[room >= 3]:
            counts[n - 1] += 1
    p = masking.ngram_probs(3)
    se = np.sqrt(p * (1 - p) / counts.sum())
    frac = counts / counts.sum()
    assert np.all(np.abs(frac - p) <= 5 * se), (frac, p, se)


def test_replacement_80_10_10():
    rng = np.random.default_rng(5)
    shown, orig = [], []
    for seed in range(400):
        toks, starts, special = _sequence(rng, 512)
        m = _mask(toks, starts, special, seed, 77)
        shown.append(m.input_ids[m.positions])
        orig.append(m.labels)
    shown, orig = np.concatenate(shown), np.concatenate(orig)
    n = len(shown)
    is_mask = shown == MASK_ID
    kept = ~is_mask & (shown == orig)
    rand = ~is_mask & ~kept
    for frac, p in ((is_mask.mean(), 0.8), (kept.mean(), 0.1 + 0.1 / V), (rand.mean(), 0.1)):
        assert abs(frac - p) <= 5 * np.sqrt(p * (1 - p) / n), (frac, p, n)
    # Random replacements are uniform over the whole vocabulary.
    r = shown[rand]
    assert r.min() >= 0 and r.max() < V and len(np.unique(r)) > V // 2


def test_no_candidates():
    toks = np.array([2, 3, 3], np.int32)
    m = _mask(toks, np.ones(3, np.bool_), np.ones(3, np.bool_), 0)
    assert len(m.positions) == 0 and m.budget == 1


@pytest.mark.parametrize("ngram", [1, 3])
def test_masked_positions_spread_over_the_whole_sequence(ngram):
    """Candidates are drawn in random order: every tenth of the sequence holds a tenth of the
    masked tokens (5 binomial SE), and a sequence's masked tokens are not one contiguous run."""
    rng = np.random.default_rng(4)
    length, deciles, runs = 128, np.zeros(10), []
    for seed in range(400):
        toks, starts, special = _sequence(rng, length)
        m = _mask(toks, starts, special, seed, ngram=ngram)
        free = np.flatnonzero(~special)  # position among the maskable tokens, 0..1
        rel = np.searchsorted(free, m.positions) / len(free)
        deciles += np.bincount(np.minimum((rel * 10).astype(int), 9), minlength=10)
        runs.append(np.count_nonzero(np.diff(np.sort(m.positions)) > 1) + 1)
    n = deciles.sum()
    se = np.sqrt(n * 0.1 * 0.9)
    assert np.all(np.abs(deciles - n / 10) <= 5 * se), deciles
    assert np.mean(runs) > 0.5 * len(m.positions) / ngram  # many separate spans per sequence

"""Checks of the masking statistics shared by the masking and pipeline tests: the reference
span-masking algorithm over Python lists, and a two-sample test of two count vectors."""

import random

import numpy as np


def reference_spans(starts, special, budget, rnd: random.Random, probs):
    """The reference algorithm over Python lists (words from token_boundary, shuffled n-gram
    candidates, n drawn per candidate, shrink to fit, skip on overlap)."""
    words = []
    for i in range(len(starts)):
        if special[i]:
            continue
        if words and not starts[i]:
            words[-1].append(i)
        else:
            words.append([i])
    cands = [[words[i : i + n] for n in range(1, len(probs) + 1)] for i in range(len(words))]
    rnd.shuffle(cands)
    covered, masked, spans = set(), [], []
    for cand in cands:
        if len(masked) >= budget:
            break
        n = rnd.choices(range(1, len(probs) + 1), weights=probs)[0]
        idx = sum(cand[n - 1], [])
        while len(masked) + len(idx) > budget and n > 1:
            n -= 1
            idx = sum(cand[n - 1], [])
        if len(masked) + len(idx) > budget or any(i in covered for i in idx):
            continue
        covered.update(idx)
        masked.extend(idx)
        spans.append(len(cand[n - 1]))
    return sorted(masked), spans


def two_sample_close(a_counts, b_counts, sigmas=5.0):
    a, b = np.asarray(a_counts, float), np.asarray(b_counts, float)
    pa, pb = a / a.sum(), b / b.sum()
    pooled = (a + b) / (a.sum() + b.sum())
    se = np.sqrt(pooled * (1 - pooled) * (1 / a.sum() + 1 / b.sum()))
    assert np.all(np.abs(pa - pb) <= sigmas * se + 1e-12), (pa, pb, se)

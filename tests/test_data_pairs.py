"""SOP/NSP pair creation on synthetic documents whose token ids encode (doc, sentence, offset).

Token id = 10_000 * (doc + 1) + 100 * sentence + offset, so every token says where it came from
and the tests can check layout, order, random-document B, truncation and coverage exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from albert_jax.data.pretraining import pairs
from albert_jax.text.tokenization import CLS_ID, SEP_ID


def make_docs(n_docs=60, seed=0, max_sents=12, max_len=30, one_sentence_every=0):
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        n = 1 if one_sentence_every and d % one_sentence_every == 0 else int(rng.integers(1, 13))
        n = min(n, max_sents)
        sents, starts = [], []
        for s in range(n):
            length = int(rng.integers(1, max_len))
            sents.append(np.arange(length, dtype=np.int32) + 10_000 * (d + 1) + 100 * s)
            starts.append(rng.random(length) < 0.8)
        docs.append((sents, starts))
    return docs


def origin(tok):
    tok = np.asarray(tok)
    return tok // 10_000 - 1, (tok % 10_000) // 100, tok % 100


def run(docs, seed=0, epochs=1, **kw):
    kw.setdefault("max_seq_length", 64)
    out = []
    for e in range(epochs):
        for d, doc in enumerate(docs):
            rng = np.random.default_rng([seed, e, d])
            insts = pairs.create_instances(doc, d, len(docs), lambda i: docs[i], rng, **kw)
            out.extend((d, k, inst) for k, inst in enumerate(insts))
    return out


def split(inst):
    t = inst.tokens
    la = inst.len_a
    return t[1 : 1 + la], t[2 + la : -1]


def is_contiguous_text(tokens):
    """Consecutive tokens come from one document in reading order (sentence, offset)."""
    d, s, o = origin(tokens)
    if len(set(d.tolist())) != 1:
        return False
    key = s * 100 + o
    return bool(np.all(np.diff(key) > 0))


@pytest.mark.parametrize("mode", ["sop", "nsp"])
def test_layout_segments_and_lengths(mode):
    for d, _, inst in run(make_docs(), mode=mode, max_seq_length=64):
        t, seg = inst.tokens, inst.segment_ids
        la, n = inst.len_a, len(t)
        assert n <= 64
        assert t[0] == CLS_ID and t[la + 1] == SEP_ID and t[-1] == SEP_ID
        assert np.sum(t == SEP_ID) == 2 and np.sum(t == CLS_ID) == 1
        assert np.all(seg[: la + 2] == 0) and np.all(seg[la + 2 :] == 1)
        a, b = split(inst)
        assert len(a) >= 1 and len(b) >= 1
        assert inst.token_boundary[[0, 1, la + 1, la + 2, n - 1]].all()
        assert is_contiguous_text(a) and is_contiguous_text(b)
        da, db = origin(a)[0][0], origin(b)[0][0]
        if inst.random_doc:
            assert inst.label == 1 and da == d and (db != d or len(make_docs()) == 1)
        else:
            assert da == db == d
            # Natural order: A before B in the document; swapped: B's text comes first.
            a_first = origin(a)[1][0] * 100 + origin(a)[2][0]
            b_first = origin(b)[1][0] * 100 + origin(b)[2][0]
            assert (a_first > b_first) == inst.swapped
            assert inst.label == int(inst.swapped)
        if mode == "nsp":
            assert not inst.swapped


def test_truncation_is_contiguous_and_balanced():
    rng = np.random.default_rng(0)
    fronts = total = 0
    for _ in range(300):
        la, lb = int(rng.integers(1, 200)), int(rng.integers(1, 200))
        a = (np.arange(la), np.ones(la, bool))
        b = (np.arange(lb) + 1000, np.ones(lb, bool))
        (ta, _), (tb, _) = pairs.truncate_pair(a, b, 100, rng)
        assert len(ta) + len(tb) == min(la + lb, 100)
        assert len(ta) >= 1 and len(tb) >= 1
        # The longer side is cut first; final lengths differ by at most one unless untouched.
        if la + lb > 100:
            if min(la, lb) <= 50:
                assert min(len(ta), len(tb)) == min(la, lb)
            else:
                assert abs(len(ta) - len(tb)) <= 1 and len(tb) <= len(ta) + 0
        for t, orig in ((ta, np.arange(la)), (tb, np.arange(lb) + 1000)):
            assert np.all(np.diff(t) == 1)
            fronts += int(t[0] - orig[0]) if len(t) else 0
            total += len(orig) - len(t)
    assert abs(fronts / total - 0.5) < 5 * np.sqrt(0.25 / total)


def test_sop_balance_single_segments_and_short_targets():
    docs = make_docs(n_docs=1000, seed=1, one_sentence_every=7)
    res = run(docs, epochs=10, max_seq_length=64, short_seq_prob=0.1)
    insts = [i for _, _, i in res]
    multi = np.array([i.num_chunk_segments >= 2 for i in insts])
    labels = np.array([i.label for i in insts])
    rand = np.array([i.random_doc for i in insts])
    # Chunks of >= 2 segments never use a random document in SOP mode; swaps are ~50%.
    assert not rand[multi].any()
    m = labels[multi]
    assert abs(m.mean() - 0.5) <= 5 * np.sqrt(0.25 / len(m))
    # Single-segment chunks: random-document B, label 1 (reference behaviour).
    assert (~multi).sum() > 100
    assert labels[~multi].all() and rand[~multi].all()
    # Short targets are drawn once per document with probability short_seq_prob.
    first = [i for _, k, i in res if k == 0]
    short = np.mean([i.short_target for i in first])
    assert abs(short - 0.1) <= 5 * np.sqrt(0.09 / len(first))
    for i in first:
        if i.short_target:
            assert 2 <= i.target_length <= 61
        else:
            assert i.target_length == 61


def test_single_segment_split_option():
    docs = make_docs(n_docs=400, seed=2, one_sentence_every=3)
    res = run(docs, epochs=2, single_segment="split")
    insts = [i for _, _, i in res]
    single = [i for i in insts if i.num_chunk_segments == 1]
    assert len(single) > 200
    # Only one-token sentences still need a random document.
    for i in single:
        if not i.random_doc:
            a, b = split(i)
            both = np.concatenate([b, a]) if i.swapped else np.concatenate([a, b])
            assert is_contiguous_text(both)
            d, s, _ = origin(both)
            assert len(set(s.tolist())) == 1
    labels = np.array([i.label for i in single if not i.random_doc])
    assert abs(labels.mean() - 0.5) <= 5 * np.sqrt(0.25 / len(labels))
    overall = np.mean([i.label for i in insts])
    assert abs(overall - 0.5) <= 5 * np.sqrt(0.25 / len(insts)) + 0.02


def test_nsp_mode_random_next_and_put_back():
    docs = make_docs(n_docs=300, seed=3)
    res = run(docs, mode="nsp", max_seq_length=512)  # no truncation
    multi = [i for _, _, i in res if i.num_chunk_segments >= 2]
    r = np.mean([i.random_doc for i in multi])
    assert abs(r - 0.5) <= 5 * np.sqrt(0.25 / len(multi))
    # Put-back: every sentence of every document appears in some instance's own-document text.
    seen = set()
    for d, _, inst in res:
        for part in split(inst):
            dd, ss, _ = origin(part)
            seen.update((int(x), int(y)) for x, y in zip(dd, ss, strict=True) if x == d)
    want = {(d, s) for d, doc in enumerate(docs) for s in range(len(doc[0]))}
    assert want <= seen


def test_sop_covers_each_sentence_once_without_truncation():
    docs = make_docs(n_docs=200, seed=4)
    res = run(docs, max_seq_length=512, short_seq_prob=0.0)
    count = {}
    for _, _, inst in res:
        if inst.random_doc:
            a, _ = split(inst)
            parts = [a]
        else:
            parts = list(split(inst))
        for part in parts:
            dd, ss, oo = origin(part)
            for key in set(zip(dd.tolist(), ss.tolist(), strict=True)):
                count[key] = count.get(key, 0) + 1
    want = {(d, s) for d, doc in enumerate(docs) for s in range(len(doc[0]))}
    assert set(count) == want and set(count.values()) == {1}


def test_bad_arguments():
    docs = make_docs(3)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="mode must be"):
        pairs.create_instances(docs[0], 0, 3, docs.__getitem__, rng, max_seq_length=64, mode="x")
    with pytest.raises(ValueError, match="max_seq_length"):
        pairs.create_instances(docs[0], 0, 3, docs.__getitem__, rng, max_seq_length=4)


def test_one_document_corpus_uses_itself():
    docs = make_docs(1, one_sentence_every=1)
    res = run(docs)
    assert len(res) == 1 and res[0][2].random_doc and res[0][2].label == 1

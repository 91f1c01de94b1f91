"""SQuAD scoring and span decoding against hand-worked values (arithmetic in the comments) and
brute-force references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from albert_jax.scoring.squad import (
    answer_tokens,
    best_spans,
    decode,
    exact_match,
    f1_score,
    normalize_answer,
    squad_evaluate,
)

# ---------------------------------------------------------------------------------------------
# Normalization and tokens
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, want",
    [
        ("The  Cat, sat!", "cat sat"),  # case, punctuation, article, double space
        ("an apple a day", "apple day"),
        ("Theater Anna", "theater anna"),  # articles only as whole words
        ("the.", ""),  # punctuation goes before articles: "the." -> "the" -> ""
        ("A-B don't", "ab dont"),  # punctuation is deleted, not turned into a space
        ("  hello\t\n world ", "hello world"),
        ("“北京”，中国。", "北京中国"),  # full-width quotes, comma, full stop
        ("《红楼梦》（清）——曹雪芹！？", "红楼梦清曹雪芹"),
        ("【注】a、b；c：d…", "注abcd"),  # deleted CJK punctuation leaves no space
    ],
)
def test_normalize_answer(raw, want):
    assert normalize_answer(raw) == want


@pytest.mark.parametrize(
    "raw, char_level, want",
    [
        ("the cat sat", False, ["cat", "sat"]),
        ("the cat sat", True, ["cat", "sat"]),  # non-CJK words stay whole
        ("北京大学", False, ["北京大学"]),
        ("北京大学", True, ["北", "京", "大", "学"]),
        ("ALBERT模型v2，好", True, ["albert", "模", "型", "v2", "好"]),
        ("", True, []),
        ("  ", False, []),
    ],
)
def test_answer_tokens(raw, char_level, want):
    assert answer_tokens(raw, char_level) == want


# ---------------------------------------------------------------------------------------------
# EM / F1
# ---------------------------------------------------------------------------------------------


def test_exact_match_english():
    assert exact_match("The Cat.", ["cat"]) == 1.0
    assert exact_match("cat sat", ["cat"]) == 0.0
    assert exact_match("cat sat", ["dog", "A cat, sat"]) == 1.0  # max over golds


def test_f1_english():
    # pred [cat, sat], gold [cat]: P = 1/2, R = 1 -> 2 * (1/2 * 1) / (1/2 + 1) = 2/3.
    assert f1_score("the cat sat", ["a cat"]) == pytest.approx(2 / 3)
    assert f1_score("the cat sat", ["dog", "a cat"]) == pytest.approx(2 / 3)
    assert f1_score("the cat sat", ["a cat", "cat sat"]) == 1.0
    # Multiset overlap: cat min(2, 1) + dog min(1, 2) = 2; P = R = 2/3 -> F1 = 2/3.
    assert f1_score("cat cat dog", ["cat dog dog"]) == pytest.approx(2 / 3)
    assert f1_score("dog", ["cat"]) == 0.0
    # An answerable question with an empty prediction: one token list empty -> 0.
    assert f1_score("", ["cat"]) == 0.0
    assert exact_match("", ["cat"]) == 0.0


def test_f1_chinese_char_level():
    # pred 北京大学 (4 chars) vs gold 北京 (2): same = 2, P = 1/2, R = 1 -> 2/3.
    assert f1_score("北京大学", ["北京"], char_level=True) == pytest.approx(2 / 3)
    # Whitespace tokens see one word each -> no overlap at all.
    assert f1_score("北京大学", ["北京"]) == 0.0
    # Mixed: pred [albert, 模, 型], gold [albert, 的, 模, 型]: same 3, P = 1, R = 3/4
    # -> 2 * 3/4 / (7/4) = 6/7.
    assert f1_score("ALBERT模型", ["albert的模型"], char_level=True) == pytest.approx(6 / 7)
    # Punctuation doesn't count as a character.
    assert f1_score("“北京。”", ["北京"], char_level=True) == 1.0
    assert exact_match("“北京。”", ["北京"]) == 1.0


@pytest.mark.parametrize("char_level", [False, True])
def test_unanswerable(char_level):
    for pred, want in [("", 1.0), ("the", 1.0), ("。", 1.0), ("Paris", 0.0), ("北京", 0.0)]:
        assert exact_match(pred, []) == want, pred
        assert f1_score(pred, [], char_level) == want, pred
    # Golds that normalize to nothing are dropped, leaving an unanswerable question.
    assert f1_score("", ["a", "."], char_level) == 1.0
    assert exact_match("x", ["the"]) == 0.0
    # ... but only when none is left: "the" is dropped, so "" no longer matches anything.
    assert exact_match("", ["the", "cat"]) == 0.0
    assert f1_score("", ["the", "cat"], char_level) == 0.0


# ---------------------------------------------------------------------------------------------
# squad_evaluate
# ---------------------------------------------------------------------------------------------

GOLDS = {
    "q1": ["Paris"],
    "q2": ["cat sat on mat", "dog"],
    "q3": [],
    "q4": [],
}
PREDS = {"q1": "paris", "q2": "the cat sat", "q3": "", "q4": "London"}
# Per question (EM, F1): q1 (1, 1); q2 (0, 2/3: [cat, sat] vs 4 gold tokens, P = 1, R = 1/2);
# q3 (1, 1): empty on no-answer; q4 (0, 0): an answer on no-answer.


def test_squad_evaluate_breakdown():
    r = squad_evaluate(GOLDS, PREDS)
    assert r["total"] == 4 and r["missing"] == 0
    assert r["exact"] == pytest.approx(100 * 2 / 4)
    assert r["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert r["HasAns_total"] == 2 and r["NoAns_total"] == 2
    assert r["HasAns_exact"] == pytest.approx(50.0)
    assert r["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert r["NoAns_exact"] == pytest.approx(50.0)
    assert r["NoAns_f1"] == pytest.approx(50.0)
    assert "best_exact" not in r


def test_squad_evaluate_only_answerable_has_no_noans_keys():
    r = squad_evaluate({"q1": ["Paris"]}, {"q1": "Rome"})
    assert r["exact"] == 0.0 and r["HasAns_total"] == 1
    assert not any(k.startswith("NoAns") for k in r)


def test_squad_evaluate_missing_counts_as_wrong():
    golds = {**GOLDS, "q5": ["x"], "q6": []}
    r = squad_evaluate(golds, PREDS)
    assert r["total"] == 6 and r["missing"] == 2
    # q5/q6 score 0 even though q6 is unanswerable (no prediction is not the same as "").
    assert r["exact"] == pytest.approx(100 * 2 / 6)
    assert r["HasAns_total"] == 3 and r["NoAns_total"] == 3
    assert r["NoAns_exact"] == pytest.approx(100 / 3)


# na_prob order: q1 0.1, q2 0.2, q4 0.3, q3 0.8.
NA_PROBS = {"q1": 0.1, "q2": 0.2, "q3": 0.8, "q4": 0.3}


def test_squad_evaluate_threshold():
    # na_threshold 0.25 nulls q4 (0.3, now right) and q3 (0.8, "" anyway):
    # EM = (1 + 0 + 1 + 1) / 4, F1 = (1 + 2/3 + 1 + 1) / 4.
    r = squad_evaluate(GOLDS, PREDS, NA_PROBS, na_threshold=0.25)
    assert r["exact"] == pytest.approx(75.0)
    assert r["f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert r["NoAns_exact"] == pytest.approx(100.0)
    # Nulling an answerable question makes it wrong: threshold 0.15 also nulls q2 (F1 2/3 -> 0).
    r = squad_evaluate(GOLDS, PREDS, NA_PROBS, na_threshold=0.15)
    assert r["f1"] == pytest.approx(100 * 3 / 4)
    assert r["HasAns_f1"] == pytest.approx(50.0)


def test_best_threshold_hand_case():
    r = squad_evaluate(GOLDS, PREDS, NA_PROBS)
    # Start "null everywhere": q3, q4 right -> 2. Walk by na_prob:
    # EM: q1 +1 -> 3 (best, 0.1); q2 +0 -> 3 (not >); q4 -1 -> 2; q3 +0 -> 2.
    assert r["best_exact"] == pytest.approx(75.0)
    assert r["best_exact_thresh"] == pytest.approx(0.1)
    # F1: q1 +1 -> 3 (0.1); q2 +2/3 -> 3.667 (best, 0.2); q4 -1; q3 +0.
    assert r["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert r["best_f1_thresh"] == pytest.approx(0.2)
    # Defaults leave everything answered (no na_prob > 1), as without na_probs.
    assert r["exact"] == pytest.approx(50.0)


def test_best_threshold_all_null_is_best():
    # Every answer is wrong: predicting no-answer everywhere (threshold 0.0) wins.
    golds = {"a": ["x"], "b": [], "c": []}
    preds = {"a": "y", "b": "z", "c": "w"}
    r = squad_evaluate(golds, preds, {"a": 0.5, "b": 0.4, "c": 0.9})
    assert r["best_exact"] == pytest.approx(100 * 2 / 3)
    assert r["best_exact_thresh"] == 0.0


def test_best_threshold_matches_threshold_sweep():
    # With distinct na_probs (> 0), best_* must equal the best score that squad_evaluate itself
    # gives over all thresholds (0.0 and each na_prob), and be reached at best_*_thresh.
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "sat", "mat"]
    for _ in range(20):
        n = int(rng.integers(1, 12))
        golds, preds = {}, {}
        for i in range(n):
            golds[f"q{i}"] = [] if rng.random() < 0.4 else [" ".join(rng.choice(words, 2))]
            preds[f"q{i}"] = "" if rng.random() < 0.3 else " ".join(rng.choice(words, 2))
        na = {q: float(p) for q, p in zip(golds, rng.permutation(n) + 1.0, strict=True)}
        r = squad_evaluate(golds, preds, na)
        for key in ("exact", "f1"):
            sweep = [squad_evaluate(golds, preds, na, t)[key] for t in [0.0, *na.values()]]
            assert r[f"best_{key}"] == pytest.approx(max(sweep))
            at = squad_evaluate(golds, preds, na, r[f"best_{key}_thresh"])[key]
            assert at == pytest.approx(r[f"best_{key}"])


def test_squad_evaluate_errors():
    with pytest.raises(ValueError, match="no questions"):
        squad_evaluate({}, {})
    with pytest.raises(ValueError, match="na_prob"):
        squad_evaluate(GOLDS, PREDS, {"q1": 0.5})


def test_squad_evaluate_char_level():
    r = squad_evaluate({"q": ["北京"]}, {"q": "北京大学"}, char_level=True)
    assert r["f1"] == pytest.approx(100 * 2 / 3)
    assert squad_evaluate({"q": ["北京"]}, {"q": "北京大学"})["f1"] == 0.0


# ---------------------------------------------------------------------------------------------
# best_spans
# ---------------------------------------------------------------------------------------------


def _brute_spans(s, e, allowed, max_len, n_best):
    out = []
    for i in range(len(s)):
        for j in range(i, len(s)):
            if allowed[i] and allowed[j] and j - i + 1 <= max_len:
                out.append((float(s[i]) + float(e[j]), i, j))
    out.sort(key=lambda c: (-c[0], c[1], c[2]))
    return out[:n_best]


def _check(got, want):
    assert [(i, j) for _, i, j in got] == [(i, j) for _, i, j in want]
    np.testing.assert_allclose([c[0] for c in got], [c[0] for c in want], rtol=0, atol=1e-12)


def test_best_spans_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(300):
        t = int(rng.integers(1, 40))
        s, e = rng.normal(size=(2, t)) * 3
        allowed = rng.random(t) < rng.choice([0.0, 0.3, 0.8, 1.0])
        max_len = int(rng.choice([1, 2, 3, 7, 30, 100]))
        n_best = int(rng.choice([1, 2, 5, 20, 1000]))
        want = _brute_spans(s, e, allowed, max_len, n_best)
        _check(best_spans(s, e, allowed, max_len, n_best), want)


def test_best_spans_full_length():
    # T = 512 against a full T x T score matrix (vectorized brute force), with a BERT-like mask.
    rng = np.random.default_rng(2)
    t = 512
    for _ in range(5):
        s, e = rng.normal(size=(2, t)).astype(np.float32)
        allowed = np.zeros(t, bool)
        allowed[20:500] = True
        allowed[rng.integers(20, 500, 50)] = False  # holes, as max-context masking makes
        m = s[:, None].astype(np.float64) + e[None, :]
        i, j = np.indices((t, t))
        ok = allowed[i] & allowed[j] & (j >= i) & (j - i < 30)
        flat = np.flatnonzero(ok.ravel())
        order = np.lexsort((j.ravel()[flat], i.ravel()[flat], -m.ravel()[flat]))[:20]
        want = [(m.ravel()[f], f // t, f % t) for f in flat[order]]
        _check(best_spans(s, e, allowed, 30, 20), want)


def test_best_spans_empty_and_order():
    assert best_spans(np.zeros(4), np.zeros(4), np.zeros(4, bool), 30, 20) == []
    assert best_spans(np.zeros(4), np.zeros(4), np.ones(4, bool), 30, 0) == []
    # Equal scores: earlier start, then earlier end, first.
    got = best_spans(np.zeros(3), np.zeros(3), np.ones(3, bool), 3, 10)
    assert [(i, j) for _, i, j in got] == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]


# ---------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------

CONTEXT = "alpha beta gamma delta epsilon"
SPAN = {w: (CONTEXT.index(w), CONTEXT.index(w) + len(w)) for w in CONTEXT.split()}
NO = (-1, -1)


def _window(words, start, end):
    """[CLS] q1 q2 [SEP] words... [SEP] with per-token logits given as dicts keyed by position
    name ("cls", "q1", "q2", or a context word); unnamed positions get -5."""
    names = ["cls", "q1", "q2", "sep", *words, "sep2"]
    offsets = [SPAN.get(n, NO) for n in names]
    return {
        "start_logits": np.array([start.get(n, -5.0) for n in names]),
        "end_logits": np.array([end.get(n, -5.0) for n in names]),
        "offsets": np.array(offsets),
    }


def test_decode_never_crosses_windows_or_question():
    # Highest start (alpha, 10) is only in window 1, highest end (epsilon, 10) only in window 2:
    # combined they would score 20 ("alpha ... epsilon"). Question tokens score 20 each.
    w1 = _window(
        ["alpha", "beta", "gamma"],
        {"cls": 2.0, "q1": 20.0, "alpha": 10.0},
        {"cls": 1.0, "q2": 20.0, "alpha": 1.0},
    )
    w2 = _window(
        ["gamma", "delta", "epsilon"],
        {"cls": 0.0, "q1": 20.0, "delta": 0.5},
        {"cls": 0.5, "q2": 20.0, "epsilon": 10.0},
    )
    out = decode([w1, w2], CONTEXT)
    # Window 1 best: alpha..alpha = 10 + 1 = 11; window 2 best: delta..epsilon = 0.5 + 10.
    assert out["text"] == "alpha" and out["score"] == pytest.approx(11.0)
    texts = [c["text"] for c in out["nbest"]]
    assert texts[1] == "delta epsilon"
    assert not any("alpha" in t and "epsilon" in t for t in texts)
    assert all(t in CONTEXT for t in texts)
    # null: window 1 [CLS] 2 + 1 = 3, window 2 0 + 0.5 = 0.5 -> min 0.5; diff 0.5 - 11.
    assert out["null_score"] == pytest.approx(0.5)
    assert out["null_score_diff"] == pytest.approx(-10.5)
    # Window order doesn't matter (null_score is a min, not the last window's).
    rev = decode([w2, w1], CONTEXT)
    assert (rev["text"], rev["null_score"]) == ("alpha", out["null_score"])
    # max_answer_length applies inside decode too.
    assert all(len(c["text"].split()) == 1 for c in decode([w1, w2], CONTEXT, 1)["nbest"])


def test_decode_no_candidate():
    w = _window([], {"cls": 3.0, "q1": 9.0}, {"cls": 1.0, "q1": 9.0})  # [SEP] at index 4
    out = decode([w], CONTEXT)
    assert out["text"] == "" and out["nbest"] == []
    assert out["null_score"] == pytest.approx(4.0)
    assert out["null_score_diff"] == math.inf
    # A zero-width token (offsets start == end) yields "" and is no answer either.
    w["offsets"][4] = (5, 5)
    assert decode([w], CONTEXT)["nbest"] == []


def test_decode_nbest_dedup_and_probabilities():
    # gamma is in both windows with different logits: keep its best score (3 + 2 = 5) once.
    w1 = _window(["beta", "gamma"], {"gamma": 3.0, "beta": 1.0}, {"gamma": 2.0, "beta": 0.0})
    w2 = _window(["gamma", "delta"], {"gamma": 1.0, "delta": 0.0}, {"gamma": 1.0, "delta": 0.0})
    out = decode([w1, w2], CONTEXT, n_best=20)
    texts = [c["text"] for c in out["nbest"]]
    assert len(texts) == len(set(texts))
    # Window 1: beta 1, gamma 5, beta gamma 3; window 2: gamma 2 (dup), delta 0, gamma delta 1.
    want = {"gamma": 5.0, "beta gamma": 3.0, "beta": 1.0, "gamma delta": 1.0, "delta": 0.0}
    assert {c["text"]: c["score"] for c in out["nbest"]} == pytest.approx(want)
    assert texts[:3] == ["gamma", "beta gamma", "beta"]
    p = np.array([c["probability"] for c in out["nbest"]])
    assert p.sum() == pytest.approx(1.0)
    # Softmax: p_i / p_0 = exp(score_i - score_0).
    for c in out["nbest"]:
        assert c["probability"] / p[0] == pytest.approx(math.exp(c["score"] - 5.0))
    # n_best truncates after dedup; a single survivor gets probability 1.
    one = decode([w1, w2], CONTEXT, n_best=1)
    assert [(c["text"], c["probability"]) for c in one["nbest"]] == [("gamma", 1.0)]


def test_decode_same_text_twice_in_one_window():
    ctx = "cat and cat"
    w = {
        "start_logits": np.array([0.0, 4.0, -9.0, 2.0]),
        "end_logits": np.array([0.0, 1.0, -9.0, 1.0]),
        "offsets": np.array([NO, (0, 3), (4, 7), (8, 11)]),
    }
    out = decode([w], ctx, max_answer_length=1)
    assert [(c["text"], c["score"]) for c in out["nbest"]] == [("cat", 5.0), ("and", -18.0)]

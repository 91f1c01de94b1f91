"""Extractive QA: SQuAD v2.0 scoring and span decoding, in plain NumPy/Python.

Scoring follows the rules of the official SQuAD v2.0 evaluation script so numbers are comparable
with published ones; the only deliberate change is that questions without a prediction count as
wrong (and are reported) instead of being skipped. ``char_level=True`` splits CJK answers into
characters (CMRC style) so Chinese F1 is not all-or-nothing.

Decoding turns per-token start/end logits of the sliding windows of one context into answer text.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

import numpy as np

# Full-width / CJK punctuation that string.punctuation (ASCII only) misses.
CJK_PUNCTUATION = (
    "，。！？、；：“”‘’（）《》〈〉【】「」『』〔〕—…～·"  # Chinese punctuation
    "￥％＃＠＆＊＋－／＜＝＞＼＾＿｀｜"  # full-width ASCII symbols
)
_PUNCT_TABLE = str.maketrans("", "", string.punctuation + CJK_PUNCTUATION)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
# CJK Unified Ideographs and extensions (the ranges BERT's tokenizer splits per character).
CJK = (
    "\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff"
    "\U00020000-\U0002a6df\U0002a700-\U0002b73f\U0002b740-\U0002b81f"
    "\U0002b820-\U0002ceaf\U0002f800-\U0002fa1f"
)
_MIXED_TOKENS = re.compile(f"[{CJK}]|[^\\s{CJK}]+")


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, drop whole-word articles, collapse whitespace (official order:
    punctuation goes first, so "the." still loses its article)."""
    s = s.lower().translate(_PUNCT_TABLE)
    return " ".join(_ARTICLES.sub(" ", s).split())


def answer_tokens(s: str, char_level: bool = False) -> list[str]:
    """Tokens of the normalized answer for F1: whitespace words, or with char_level each CJK
    character alone while other non-space runs stay whole words."""
    s = normalize_answer(s)
    return _MIXED_TOKENS.findall(s) if char_level else s.split()


def _clean_golds(golds: Sequence[str]) -> list[str]:
    # Official: golds that normalize to nothing are dropped; none left means unanswerable, scored
    # against "" (so only an empty prediction is right).
    return [g for g in golds if normalize_answer(g)] or [""]


def _f1(pred_toks: list[str], gold_toks: list[str]) -> float:
    if not pred_toks or not gold_toks:
        return float(pred_toks == gold_toks)
    same = sum((Counter(pred_toks) & Counter(gold_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def exact_match(pred: str, golds: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold; empty golds: 1.0 iff pred
    normalizes to empty."""
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _clean_golds(golds)))


def f1_score(pred: str, golds: Sequence[str], char_level: bool = False) -> float:
    """Best token-overlap F1 over the golds (empty golds: 1.0 iff pred normalizes to empty)."""
    p = answer_tokens(pred, char_level)
    return max(_f1(p, answer_tokens(g, char_level)) for g in _clean_golds(golds))


def _mean_pct(scores: dict[str, float], qids: list[str]) -> float:
    return 100.0 * sum(scores[q] for q in qids) / len(qids)


def _best_thresh(
    preds: dict[str, str],
    raw: dict[str, float],
    na_probs: dict[str, float],
    has_ans: dict[str, bool],
    total: int,
) -> tuple[float, float]:
    """The official find_best_thresh: start from "no answer everywhere", then admit questions in
    order of rising na_prob, keeping the best running score (strict >, so the lowest threshold
    wins ties). Missing questions score 0 throughout, hence the start counts only answered ones."""
    cur = best = float(sum(1 for q in raw if not has_ans[q]))
    best_thresh = 0.0
    for q in sorted((q for q in na_probs if q in raw), key=na_probs.__getitem__):
        # Official quirk kept for comparability: a no-answer question loses 1 whenever the raw
        # pred string is non-empty, even if it normalizes to "" (e.g. "the").
        cur += raw[q] if has_ans[q] else (-1.0 if preds[q] else 0.0)
        if cur > best:
            best, best_thresh = cur, float(na_probs[q])
    return 100.0 * best / total, best_thresh


def squad_evaluate(
    golds: dict[str, list[str]],
    preds: dict[str, str],
    na_probs: dict[str, float] | None = None,
    na_threshold: float = 1.0,
    char_level: bool = False,
) -> dict:
    """Official SQuAD v2.0 metrics (percentages) over the questions in ``golds``.

    With ``na_probs``, a question whose na_prob > na_threshold is answered "" (no answer), and the
    best thresholds for EM and F1 are searched. Questions absent from ``preds`` score 0 and are
    counted in ``missing``; predictions for unknown ids are ignored (as the official script does).
    """
    if not golds:
        raise ValueError("squad_evaluate: no questions")
    answered = [q for q in golds if q in preds]
    if na_probs is not None and (lack := [q for q in answered if q not in na_probs]):
        raise ValueError(f"squad_evaluate: no na_prob for {len(lack)} questions, e.g. {lack[0]!r}")
    # Official: a question is answerable iff its answer list is non-empty.
    has_ans = {q: bool(golds[q]) for q in golds}
    exact_raw = {q: exact_match(preds[q], golds[q]) for q in answered}
    f1_raw = {q: f1_score(preds[q], golds[q], char_level) for q in answered}

    def thresholded(raw: dict[str, float]) -> dict[str, float]:
        out = dict.fromkeys(golds, 0.0)  # missing stay 0
        for q, s in raw.items():
            null = na_probs is not None and na_probs[q] > na_threshold
            out[q] = float(not has_ans[q]) if null else s
        return out

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    qids = list(golds)
    result = {"exact": _mean_pct(exact, qids), "f1": _mean_pct(f1, qids), "total": len(qids)}
    for name, want in (("HasAns", True), ("NoAns", False)):
        sub = [q for q in qids if has_ans[q] is want]
        if sub:
            result[f"{name}_exact"] = _mean_pct(exact, sub)
            result[f"{name}_f1"] = _mean_pct(f1, sub)
            result[f"{name}_total"] = len(sub)
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            score, thresh = _best_thresh(preds, raw, na_probs, has_ans, len(qids))
            result[f"best_{name}"] = score
            result[f"best_{name}_thresh"] = thresh
    result["missing"] = len(qids) - len(answered)
    return result


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def best_spans(
    start_logits, end_logits, allowed, max_answer_length: int, n_best: int
) -> list[tuple[float, int, int]]:
    """Up to n_best (start+end score, start, end), best first (ties: earlier start, then end),
    over all pairs with allowed[start], allowed[end], start <= end < start + max_answer_length.

    All pairs, not just top-k starts x top-k ends: only a T x max_answer_length band can be valid,
    so scoring it whole is cheap (512 x 30) and exact.
    """
    s = np.asarray(start_logits, dtype=np.float64)
    e = np.asarray(end_logits, dtype=np.float64)
    ok = np.asarray(allowed, dtype=bool)
    t = s.shape[0]
    length = min(int(max_answer_length), t)
    if n_best <= 0 or length <= 0 or not ok.any():
        return []
    start = np.arange(t)[:, None]
    end = start + np.arange(length)[None, :]  # [T, L]: band of candidate ends per start
    in_range = end < t
    end = np.minimum(end, t - 1)
    valid = in_range & ok[:, None] & ok[end]
    scores = np.where(valid, s[:, None] + e[end], -np.inf).ravel()
    k = min(int(n_best), int(valid.sum()))
    if k == 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    starts, ends = top // length, end.ravel()[top]
    # Ties among the top k are ordered deterministically; ties *at* the cut are arbitrary.
    order = np.lexsort((ends, starts, -scores[top]))
    return [(float(scores[top[i]]), int(starts[i]), int(ends[i])) for i in order]


def decode(
    windows: list[dict], context: str, max_answer_length: int = 30, n_best: int = 20
) -> dict:
    """Best answer of one example from the sliding windows of its context.

    Spans come from one window at a time (start and end in the same window) and both ends must be
    answer candidates (offsets[:, 0] >= 0), so [CLS], question, [SEP] and padding never enter a
    span; the caller marks context tokens whose best window is another one as (-1, -1) too.
    null_score is the least confident window's [CLS] score (as BERT's run_squad), and
    null_score_diff = null_score - best span score is what v2 thresholds are tuned on.
    """
    if not windows:
        raise ValueError("decode: no windows")
    null_score = math.inf
    candidates: list[tuple[float, str]] = []
    for w in windows:
        s = np.asarray(w["start_logits"], dtype=np.float64)
        e = np.asarray(w["end_logits"], dtype=np.float64)
        offsets = np.asarray(w["offsets"], dtype=np.int64)
        null_score = min(null_score, float(s[0] + e[0]))
        for score, i, j in best_spans(s, e, offsets[:, 0] >= 0, max_answer_length, n_best):
            text = context[offsets[i, 0] : offsets[j, 1]]
            if text:  # an empty span would be indistinguishable from "no answer"
                candidates.append((score, text))
    # Best score per distinct text (overlapping windows re-find the same span), then the n-best.
    candidates.sort(key=lambda c: -c[0])
    seen: dict[str, float] = {}
    for score, text in candidates:
        seen.setdefault(text, score)
    nbest = list(seen.items())[: max(int(n_best), 0)]
    if not nbest:
        return {
            "text": "",
            "score": -math.inf,
            "null_score": null_score,
            "null_score_diff": math.inf,
            "nbest": [],
        }
    scores = np.array([sc for _, sc in nbest])
    probs = np.exp(scores - scores.max())  # shifted: no overflow for large logits
    probs /= probs.sum()
    text, best = nbest[0]
    return {
        "text": text,
        "score": best,
        "null_score": null_score,
        "null_score_diff": null_score - best,
        "nbest": [
            {"text": t, "score": sc, "probability": float(p)}
            for (t, sc), p in zip(nbest, probs, strict=True)
        ],
    }

"""Evaluation metrics for fine-tuning, computed with scikit-learn, SciPy and seqeval.

Every function returns plain Python floats so the result can go straight into JSON logs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats
from seqeval.metrics import accuracy_score as seq_accuracy
from seqeval.scheme import IOB2, IOBES, Entities
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, mean_squared_error

TASK_METRICS = {
    "classification": ("accuracy", "macro_f1", "mcc", "f1"),  # f1: of `task.positive`'s class
    "regression": ("pearson", "spearman", "mse"),
    "tagging": ("f1", "precision", "recall", "accuracy"),
    "qa": ("f1", "exact"),  # SQuAD's, in percent (albert_jax.scoring.squad)
    "multiple_choice": ("accuracy",),
    "relation": ("f1", "precision", "recall", "subject_f1"),  # exact triples, micro
    "seq2seq": ("f1", "exact_match", "bleu", "rouge_l", "entity_f1"),  # textgen, in percent
}
DEFAULT_METRIC = {
    "classification": "accuracy",
    "regression": "pearson",
    "tagging": "f1",
    "qa": "f1",
    "multiple_choice": "accuracy",
    "relation": "f1",
    "seq2seq": "f1",
}
_LOWER_IS_BETTER = frozenset({"mse"})
# BMES (Chinese segmentation / NER convention) is IOBES with M for "inside".
_BMES_TO_IOBES = {"B": "B", "M": "I", "E": "E", "S": "S"}
_SCHEMES = {"BIO": (IOB2, frozenset("BI")), "BMES": (IOBES, frozenset("BMES"))}
SCHEMES = tuple(_SCHEMES)  # task.scheme's values


def classification_metrics(labels, preds, positive: int | None = None) -> dict:
    """Accuracy, macro F1 and Matthews correlation of integer class ids; with `positive` (a
    class id), also `f1`: that class's F1 (GLUE's MRPC and QQP)."""
    y, p = _pair(labels, preds, np.int64)
    if y.size == 0:
        raise ValueError("classification_metrics: no examples")
    out = {
        "accuracy": float(accuracy_score(y, p)),
        # zero_division=0: a class never predicted scores 0 instead of warning on every eval.
        "macro_f1": float(f1_score(y, p, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(y, p)),
    }
    if positive is not None:
        out["f1"] = float(f1_score(y, p, pos_label=positive, average="binary", zero_division=0))
    return out


def regression_metrics(labels, preds) -> dict:
    """Pearson and Spearman correlation and mean squared error of float predictions."""
    y, p = _pair(labels, preds, np.float64)
    if y.size == 0:
        raise ValueError("regression_metrics: no examples")
    # A correlation is undefined when either side is constant (e.g. a collapsed model predicting
    # one value) or has fewer than two points; SciPy then warns and returns NaN, which would
    # poison best-checkpoint selection. Report 0.0 (no linear / rank relation) instead.
    degenerate = y.size < 2 or np.ptp(y) == 0 or np.ptp(p) == 0
    return {
        "pearson": 0.0 if degenerate else float(stats.pearsonr(y, p)[0]),
        "spearman": 0.0 if degenerate else float(stats.spearmanr(y, p)[0]),
        "mse": float(mean_squared_error(y, p)),
    }


def tagging_metrics(
    true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]], scheme: str = "BIO"
) -> dict:
    """Entity-level micro precision/recall/F1 (seqeval, strict mode), per-type scores, token
    accuracy.

    Strict mode: an entity counts only if it is well formed under the scheme, so with BIO an
    entity that starts with ``I-`` is *not* an entity (seqeval's default conlleval-compatible
    mode would open one there). Both gold and predictions are read this way. ``BMES`` tags are
    mapped to IOBES (M -> I); bare ``B``/``M``/``E``/``S`` tags (word segmentation) get the dummy
    type ``W`` so every word is an entity.

    Returns ``precision``, ``recall``, ``f1``, ``accuracy`` and ``per_type``:
    ``{type: {"precision", "recall", "f1", "support"}}``.
    """
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(_SCHEMES)}, got {scheme!r}")
    if len(true_tags) != len(pred_tags):
        raise ValueError(f"{len(true_tags)} gold sequences but {len(pred_tags)} predicted")
    for i, (t, p) in enumerate(zip(true_tags, pred_tags, strict=True)):
        if len(t) != len(p):
            raise ValueError(f"sequence {i}: {len(t)} gold tags but {len(p)} predicted")
    token_scheme, _ = _SCHEMES[scheme]
    gold = [_normalise(s, scheme, i, "gold") for i, s in enumerate(true_tags)]
    pred = [_normalise(s, scheme, i, "predicted") for i, s in enumerate(pred_tags)]
    # Entities as seqeval's strict mode extracts them (the scheme-aware part). Its
    # precision_recall_fscore_support re-extracts them for every call (3 calls for micro, per-type
    # and type names: ~3x slower on a 100k-token dev set), so the counts are taken here once.
    gold_by_type = _by_type(Entities(gold, token_scheme))
    pred_by_type = _by_type(Entities(pred, token_scheme))
    per_type, totals = {}, [0, 0, 0]
    for name in sorted(gold_by_type.keys() | pred_by_type.keys()):
        g, p = gold_by_type.get(name, set()), pred_by_type.get(name, set())
        counts = (len(g & p), len(p), len(g))
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        per_type[name] = {**_prf(*counts), "support": len(g)}
    micro = _prf(*totals)
    n_tokens = sum(len(s) for s in gold)
    return {
        **micro,
        # The tag mapping is one-to-one, so this equals accuracy on the original strings.
        "accuracy": float(seq_accuracy(gold, pred)) if n_tokens else 0.0,
        "per_type": per_type,
    }


# ---- collapsed predictions: one line when an evaluation shows the run learned nothing ----------
# The most common prediction may leave out at most this share of the predictions (1 % of them,
# rounded down: with fewer than 100 every one must agree). 720 no-answers out of 721 questions
# count as collapsed; a healthy model on a task with a 99.5 % majority class may be flagged too,
# and the line says how the gold labels are distributed.
COLLAPSE_TOLERANCE = 0.01


def prediction_collapse(
    predictions: Sequence,
    unit: str = "examples",
    verb: str = "predicted",
    golds: Sequence | None = None,
    show: Callable[[object], str] = repr,
) -> str | None:
    """What is degenerate about a split's discrete predictions (class labels, tags, answer or
    generated texts; hashable), or None when they vary. Degenerate: the most common prediction
    is all of them, or all but at most COLLAPSE_TOLERANCE of them: "every one of 1716 examples
    predicted 'pos'", "720 of 721 questions answered ''" (`show` writes the prediction). With
    `golds`, the gold share of the predicted value follows: "(the label prior: 58.0 % of the
    gold are 'pos')". Fewer than two predictions never collapse."""
    n = len(predictions)
    if n < 2:
        return None
    top, k = Counter(predictions).most_common(1)[0]
    if n - k > int(n * COLLAPSE_TOLERANCE):
        return None
    text = f"{'every one' if k == n else k} of {n} {unit} {verb} {show(top)}"
    if golds:
        counts = Counter(golds)
        share = 100.0 * counts.get(top, 0) / len(golds)
        prior = "the label prior: " if counts.get(top, 0) == max(counts.values()) else ""
        text += f" ({prior}{share:.1f} % of the gold are {top!r})"
    return text


def regression_collapse(preds, golds=None) -> str | None:
    """Regression predictions with (about) no spread: their standard deviation at most 1e-3 of
    the gold values' (exactly 0 without golds or with constant golds), or None."""
    p = np.asarray(preds, np.float64).reshape(-1)
    if p.size < 2:
        return None
    spread = float(p.std())
    gold = float(np.std(np.asarray(golds, np.float64))) if golds is not None and len(golds) else 0
    if spread > 1e-3 * gold:
        return None
    against = f", the gold values' {gold:.3g}" if gold else ""
    return f"all {p.size} predictions are about {p.mean():.4g} (std {spread:.2g}{against})"


def nothing_predicted(counts: Sequence[int], unit: str = "examples", what: str = "triple"):
    """When every count (predictions per example) is 0: "no triple predicted for any of 500
    sentences"; else None."""
    if not len(counts) or any(counts):
        return None
    return f"no {what} predicted for any of {len(counts)} {unit}"


def collapse_warning(split: str, step, what: str, config=None, head: str | None = None):
    """The one warning line for collapsed predictions of `split` at `step`: `what` (from the
    functions above) and the likely causes, with the run's values where `config` has them (the
    learning rate, the steps, and with `head` the learning-rate multiplier of a fresh head)."""
    optim = _get(config, "optim")
    lr, mult = _get(optim, "learning_rate"), _get(optim, "lr_multipliers")
    steps, per_epoch = _get(config, "total_steps"), _get(config, "steps_per_epoch")
    causes = [f"the learning rate (too low or too high: optim.learning_rate={_g(lr)})"]
    if steps and per_epoch:  # a resolved schedule (`run.schedule`)
        epochs = steps / per_epoch
        counted = f" (total_steps={steps}, {epochs:.3g} epoch{'' if epochs == 1 else 's'})"
    elif steps or _get(config, "num_epochs"):
        counted = f" (total_steps={steps})" if steps else f" (num_epochs={_g(config.num_epochs)})"
    else:
        counted = ""
    causes.append("too few steps" + counted)
    if head:
        hint = "" if mult else f"; e.g. '{head}=10'"
        causes.append(
            f"the fresh head's learning-rate multiplier (optim.lr_multipliers={mult or ''!r}{hint})"
        )
    at = f" at step {step}" if step is not None else ""
    listed = ", ".join(causes[:-1]) + f" or {causes[-1]}"
    return f"{split} predictions collapsed{at}: {what}; likely causes: {listed}"


def _get(node, key):
    return node.get(key) if node is not None else None


def _g(x) -> str:
    return "?" if x is None else f"{x:g}" if isinstance(x, int | float) else str(x)


def welch_t(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t and two-sided p for mean(a) - mean(b) (unequal variances: seeds of two
    fine-tuning setups); nan with fewer than two values on a side."""
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    r = stats.ttest_ind(a, b, equal_var=False)
    return float(r.statistic), float(r.pvalue)


def detectable_effect(n1: int, n2: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference of means, in units of the common standard deviation (Cohen's
    d), that a two-sided two-sample t-test at level `alpha` detects with probability `power`
    with n1 and n2 values a side: the d at which the noncentral t (df n1 + n2 - 2,
    noncentrality d / sqrt(1/n1 + 1/n2)) falls beyond the critical values with that
    probability. n = 5 a side: 2.02; nan with fewer than two values on a side."""
    if n1 < 2 or n2 < 2:
        return float("nan")
    from scipy.optimize import brentq

    df, scale = n1 + n2 - 2, math.sqrt(1.0 / n1 + 1.0 / n2)
    crit = stats.t.ppf(1.0 - alpha / 2.0, df)

    def missed(d: float) -> float:  # power at d, less the power wanted
        nc = d / scale
        # P(T > crit) + P(T < -crit); the second as the mirror image (scipy's cdf far in the
        # lower tail of a large noncentrality returns nan)
        return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc)) - power

    high = 1.0
    while missed(high) < 0:
        high *= 2.0
    return float(brentq(missed, 0.0, high, xtol=1e-10))


def pooled_std(a: Sequence[float], b: Sequence[float]) -> float:
    """The two samples' pooled standard deviation (each with ddof 1); nan with fewer than two
    values on a side."""
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    return float(math.sqrt(((len(a) - 1) * va + (len(b) - 1) * vb) / (len(a) + len(b) - 2)))


def min_detectable_difference(
    a: Sequence[float], b: Sequence[float], alpha: float = 0.05, power: float = 0.8
) -> float:
    """The smallest difference of means this design (len(a) and len(b) seeds) detects with
    `power` at two-sided level `alpha`, given the spread observed: `detectable_effect` times
    the pooled standard deviation, in the values' own units."""
    return detectable_effect(len(a), len(b), alpha, power) * pooled_std(a, b)


def best_metric_name(task_type: str, requested: str | None = None) -> str:
    """The metric that selects the best checkpoint: ``requested`` if it exists for the task,
    else the customary default (accuracy / pearson / entity F1)."""
    if task_type not in DEFAULT_METRIC:
        raise ValueError(f"unknown task type {task_type!r}; expected {sorted(DEFAULT_METRIC)}")
    if requested is None:
        return DEFAULT_METRIC[task_type]
    if requested not in TASK_METRICS[task_type]:
        raise ValueError(
            f"metric {requested!r} is not computed for {task_type} tasks; "
            f"choose one of {list(TASK_METRICS[task_type])}"
        )
    return requested


def higher_is_better(name: str) -> bool:
    """Direction of a metric for best-checkpoint selection (only ``mse`` is minimised)."""
    return name not in _LOWER_IS_BETTER


def _by_type(entities: Entities) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for sentence in entities.entities:
        for e in sentence:
            out.setdefault(e.tag, set()).add(e.to_tuple())
    return out


def _prf(tp: int, n_pred: int, n_gold: int) -> dict[str, float]:
    """Precision, recall, F1 from counts; 0 where undefined (seqeval's zero_division=0)."""
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _pair(labels, preds, dtype) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=dtype).reshape(-1)
    p = np.asarray(preds, dtype=dtype).reshape(-1)
    if y.shape != p.shape:
        raise ValueError(f"{y.size} labels but {p.size} predictions")
    return y, p


def scheme_error(tag: str, scheme: str) -> str | None:
    """Why `tag` is not a tag of `scheme` (BIO / BMES), or None when it is one."""
    _, prefixes = _SCHEMES[scheme]
    prefix, sep, kind = tag.partition("-")
    if tag == "O" or (prefix in prefixes and (kind or not sep)):
        return None
    return f"tag {tag!r} is not a {scheme} tag (expected O or {'/'.join(sorted(prefixes))}[-TYPE])"


def _normalise(tags: Sequence[str], scheme: str, index: int, what: str) -> list[str]:
    """Validates tags against the scheme (with a readable error, rather than seqeval's KeyError
    on an unknown prefix) and rewrites BMES into seqeval's IOBES."""
    out = []
    for tag in tags:
        if tag == "O":
            out.append(tag)
            continue
        if why := scheme_error(tag, scheme):
            raise ValueError(f"{what} sequence {index}: {why}")
        prefix, sep, kind = tag.partition("-")
        if scheme == "BMES":
            prefix = _BMES_TO_IOBES[prefix]
        out.append(f"{prefix}-{kind if sep else 'W'}")
    return out

"""Fine-tuning metrics against values worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from seqeval.metrics import classification_report
from seqeval.metrics import f1_score as seqeval_default_f1
from seqeval.scheme import IOB2, IOBES

from albert_jax.scoring.metrics import (
    best_metric_name,
    classification_metrics,
    higher_is_better,
    regression_metrics,
    tagging_metrics,
)


def test_classification_known_table():
    # 2x2 table with positive class 1: TP=4, FN=1, FP=2, TN=3 (10 examples).
    labels = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    preds = [1, 1, 1, 1, 0, 1, 1, 0, 0, 0]
    m = classification_metrics(labels, preds)
    assert m["accuracy"] == pytest.approx(7 / 10)
    # F1 = 2TP / (2TP + FP + FN): class 1 -> 8/11; class 0 (TP=3, FP=1, FN=2) -> 6/9.
    assert m["macro_f1"] == pytest.approx((8 / 11 + 6 / 9) / 2)
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (12 - 2) / sqrt(6*5*5*4).
    assert m["mcc"] == pytest.approx(10 / math.sqrt(600))


def test_classification_constant_prediction_is_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = classification_metrics([0, 1, 2, 1], [1, 1, 1, 1])
    assert m["accuracy"] == 0.5
    assert m["mcc"] == 0.0
    # Only class 1 is ever predicted: F1 = 2*2/(2*2+2+0) = 2/3; classes 0 and 2 score 0.
    assert m["macro_f1"] == pytest.approx((2 / 3) / 3)


def test_regression_line_and_curve():
    # preds = 2*labels + 1: a perfect line; mse = mean(2^2, 3^2, 4^2, 5^2) = 54/4.
    m = regression_metrics([1, 2, 3, 4], [3, 5, 7, 9])
    assert m["pearson"] == pytest.approx(1.0)
    assert m["spearman"] == pytest.approx(1.0)
    assert m["mse"] == pytest.approx(13.5)
    # y = x^2: ranks agree (spearman 1); pearson = sum(dx*dy)/sqrt(sum dx^2 * sum dy^2)
    # with dx = (-1.5, -.5, .5, 1.5), dy = (-6.5, -3.5, 1.5, 8.5): 25 / sqrt(5 * 129).
    m = regression_metrics([1, 2, 3, 4], [1, 4, 9, 16])
    assert m["pearson"] == pytest.approx(25 / math.sqrt(645))
    assert m["spearman"] == pytest.approx(1.0)


def test_regression_constant_inputs_give_zero_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = regression_metrics([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
        assert m["pearson"] == 0.0 and m["spearman"] == 0.0
        assert m["mse"] == pytest.approx(2 / 3)  # (1 + 0 + 1) / 3
        assert regression_metrics([5.0, 5.0], [1.0, 2.0])["pearson"] == 0.0
        assert regression_metrics([1.0], [1.0])["spearman"] == 0.0


def test_bio_one_boundary_wrong():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["B-PER", "O", "O", "B-LOC"]]  # PER cut short: wrong end boundary
    m = tagging_metrics(gold, pred, "BIO")
    # 2 gold entities, 2 predicted, 1 exact match: P = R = F1 = 1/2.
    assert (m["precision"], m["recall"], m["f1"]) == (0.5, 0.5, 0.5)
    assert m["accuracy"] == 0.75  # 3 of 4 tags equal
    assert m["per_type"]["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert m["per_type"]["LOC"]["f1"] == 1.0


def test_bio_strict_mode_ignores_entities_starting_with_i():
    gold = [["B-PER", "I-PER", "O"]]
    pred = [["I-PER", "I-PER", "O"]]
    # seqeval's default (conlleval) mode opens an entity at the stray I-: a perfect score...
    assert seqeval_default_f1(gold, pred) == 1.0
    # ...strict IOB2 (what we report) has no predicted entity: P = R = F1 = 0.
    m = tagging_metrics(gold, pred, "BIO")
    assert (m["precision"], m["recall"], m["f1"]) == (0.0, 0.0, 0.0)
    # The same rule applies to gold: an I- start is not a gold entity either.
    m = tagging_metrics([["I-LOC", "O"]], [["B-LOC", "O"]], "BIO")
    assert m["recall"] == 0.0 and m["precision"] == 0.0


def test_bmes_typed_entities():
    gold = [["B-LOC", "M-LOC", "E-LOC", "O", "S-PER"]]  # LOC [0,2], PER [4]
    pred = [["B-LOC", "E-LOC", "S-LOC", "O", "S-PER"]]  # LOC [0,1], LOC [2], PER [4]
    m = tagging_metrics(gold, pred, "BMES")
    # 1 match of 3 predicted / 2 gold: P = 1/3, R = 1/2, F1 = 2PR/(P+R) = (1/3)/(5/6) = 2/5.
    assert m["precision"] == pytest.approx(1 / 3)
    assert m["recall"] == pytest.approx(1 / 2)
    assert m["f1"] == pytest.approx(0.4)
    assert m["accuracy"] == pytest.approx(3 / 5)  # positions 1 and 2 differ
    assert m["per_type"]["PER"]["f1"] == 1.0 and m["per_type"]["LOC"]["f1"] == 0.0


def test_bmes_word_segmentation_without_types():
    gold = [["B", "E", "S", "B", "M", "E"]]  # words [0,1] [2] [3,5]
    pred = [["B", "E", "S", "S", "B", "E"]]  # words [0,1] [2] [3] [4,5]
    m = tagging_metrics(gold, pred, "BMES")
    # 2 matches, 4 predicted, 3 gold: P = 1/2, R = 2/3, F1 = 2*(1/3)/(7/6) = 4/7.
    assert m["precision"] == pytest.approx(0.5)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(4 / 7)
    assert list(m["per_type"]) == ["W"]


def test_tagging_without_entities_is_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = tagging_metrics([["O", "O"]], [["O", "O"]], "BIO")
    assert m["f1"] == 0.0 and m["accuracy"] == 1.0 and m["per_type"] == {}


@pytest.mark.parametrize(
    "tags, scheme", [(["M-PER"], "BIO"), (["E-PER"], "BIO"), (["I-PER"], "BMES"), (["B-"], "BIO")]
)
def test_tagging_rejects_tags_outside_the_scheme(tags, scheme):
    with pytest.raises(ValueError, match="is not a"):
        tagging_metrics([tags], [["O"]], scheme)


def test_tagging_length_mismatch():
    with pytest.raises(ValueError, match="sequence 0"):
        tagging_metrics([["O", "O"]], [["O"]], "BIO")
    with pytest.raises(ValueError, match="scheme"):
        tagging_metrics([["O"]], [["O"]], "IOB1")


def test_best_metric_name():
    assert best_metric_name("classification") == "accuracy"
    assert best_metric_name("regression") == "pearson"
    assert best_metric_name("tagging") == "f1"
    assert best_metric_name("classification", "mcc") == "mcc"
    with pytest.raises(ValueError, match="not computed for regression"):
        best_metric_name("regression", "accuracy")
    assert best_metric_name("qa") == "f1" and best_metric_name("multiple_choice") == "accuracy"
    with pytest.raises(ValueError, match="unknown task type"):
        best_metric_name("summarization")
    assert higher_is_better("f1") and not higher_is_better("mse")


@pytest.mark.parametrize("scheme", ["BIO", "BMES"])
def test_agrees_with_seqeval_strict_report(scheme):
    # Random (often ill-formed) sequences: our counts must equal seqeval's own strict report.
    rng = np.random.default_rng(0)
    prefixes = ["B", "I"] if scheme == "BIO" else ["B", "M", "E", "S"]
    tags = ["O"] + [f"{p}-{t}" for p in prefixes for t in ("PER", "LOC")]

    lengths = rng.integers(1, 12, size=60)
    gold = [[tags[i] for i in rng.integers(0, len(tags), n)] for n in lengths]
    pred = [[t if rng.random() < 0.7 else tags[rng.integers(len(tags))] for t in s] for s in gold]
    m = tagging_metrics(gold, pred, scheme)
    as_iobes = (lambda s: [t.replace("M-", "I-", 1) for t in s]) if scheme == "BMES" else list
    report = classification_report(
        [as_iobes(s) for s in gold],
        [as_iobes(s) for s in pred],
        mode="strict",
        scheme=IOB2 if scheme == "BIO" else IOBES,
        output_dict=True,
        zero_division=0,
    )
    micro = report["micro avg"]
    assert 0.1 < m["f1"] < 0.9  # a mix of hits and misses
    assert (m["precision"], m["recall"], m["f1"]) == pytest.approx(
        (micro["precision"], micro["recall"], micro["f1-score"])
    )
    for name, r in m["per_type"].items():
        assert (r["precision"], r["recall"], r["f1"]) == pytest.approx(
            (report[name]["precision"], report[name]["recall"], report[name]["f1-score"])
        )
        assert r["support"] == report[name]["support"]

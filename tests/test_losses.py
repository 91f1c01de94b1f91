"""Losses as run_pretraining.py defines them, checked against direct NumPy arithmetic."""

import numpy as np

from albert_jax.model import losses


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_mlm_loss_is_weighted_mean_over_real_predictions():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 7)).astype(np.float32)
    ids = np.array([[1, 2, 0], [3, 0, 0]])
    w = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], np.float32)  # padding predictions weigh 0
    nll = -np.take_along_axis(_log_softmax(logits), ids[..., None], -1)[..., 0]
    expect = (nll * w).sum() / (w.sum() + 1e-5)
    np.testing.assert_allclose(losses.mlm_loss(logits, ids, w), expect, rtol=1e-6)
    # Not a per-sequence mean: row 0 has two predictions, row 1 one, each token counts once.
    per_seq = np.mean([(nll[0] * w[0]).sum() / 2, nll[1, 0]])
    assert not np.isclose(expect, per_seq)
    acc = (np.argmax(logits, -1) == ids).astype(np.float32)
    np.testing.assert_allclose(
        losses.mlm_accuracy(logits, ids, w), (acc * w).sum() / (w.sum() + 1e-5), rtol=1e-6
    )


def test_sop_loss_and_accuracy():
    logits = np.array([[2.0, -1.0], [0.5, 0.25], [-3.0, 1.0]], np.float32)
    labels = np.array([0, 1, 1])
    expect = -np.mean(_log_softmax(logits)[np.arange(3), labels])
    np.testing.assert_allclose(losses.sop_loss(logits, labels), expect, rtol=1e-6)
    np.testing.assert_allclose(losses.sop_accuracy(logits, labels), 2 / 3, rtol=1e-6)


def test_pretraining_loss_is_mlm_plus_sop_with_the_reference_denominator():
    """One real prediction, so the reference's +1e-5 in the MLM denominator is a 1e-5 relative
    effect (10x the tolerance), and the total is the unweighted sum of both losses."""
    from types import SimpleNamespace

    rng = np.random.default_rng(1)
    mlm = rng.normal(size=(2, 2, 5)).astype(np.float32)
    sop = rng.normal(size=(2, 2)).astype(np.float32)
    batch = {
        "masked_lm_ids": np.array([[3, 0], [0, 0]]),
        "masked_lm_weights": np.array([[1.0, 0.0], [0.0, 0.0]], np.float32),
        "sentence_order_label": np.array([1, 0]),
    }
    total, m = losses.pretraining_loss(SimpleNamespace(mlm_logits=mlm, sop_logits=sop), batch)
    mlm_nll = -_log_softmax(mlm.astype(np.float64))[0, 0, 3] / (1 + 1e-5)
    sop_nll = -np.mean(_log_softmax(sop.astype(np.float64))[[0, 1], [1, 0]])
    np.testing.assert_allclose(m["mlm_loss"], mlm_nll, rtol=1e-6)
    np.testing.assert_allclose(m["sop_loss"], sop_nll, rtol=1e-6)
    np.testing.assert_allclose(total, mlm_nll + sop_nll, rtol=1e-6)
    assert set(m) == {"mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"}

"""Losses as run_pretraining.py defines them, checked against direct NumPy arithmetic."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


# ---------------------------------------------------------------- the one cross-entropy
# The hand-written copies `losses.cross_entropy` replaced, kept verbatim as references: it must
# give each one's values and gradients to the bit (compared as arrays: +0.0 == -0.0).
def _old_nll(logits, labels):  # losses._nll (MLM, SOP)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.sum(logp * jax.nn.one_hot(labels, logp.shape[-1], dtype=logp.dtype), axis=-1)


def _old_classification(logits, label):  # classification and choice (-inf padded options)
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, label[:, None], axis=1)[:, 0]


def _old_tagging(logits, labels):  # tagging and seq2seq's _token_nll: labels < 0 masked
    mask = labels >= 0
    logp = jax.nn.log_softmax(logits)
    nll = -jnp.take_along_axis(logp, jnp.maximum(labels, 0)[..., None], axis=-1)[..., 0]
    return nll * mask


def _old_qa(logits, pos):  # qa: [B, T, 2] logits over positions, [B, 2] targets
    logp = jax.nn.log_softmax(logits, axis=1)
    return -jnp.take_along_axis(logp, pos[:, None, :], axis=1)[:, 0]


def _cases():
    rng = np.random.default_rng(3)
    mlm = rng.normal(size=(3, 4, 11)).astype(np.float32)
    mlm_ids = rng.integers(0, 11, size=(3, 4))
    cls = rng.normal(size=(5, 3)).astype(np.float32)
    cls_ids = rng.integers(0, 3, size=5)
    choice = np.where(np.arange(4) < 3, rng.normal(size=(5, 4)), -np.inf).astype(np.float32)
    tags = rng.normal(size=(2, 6, 5)).astype(np.float32)
    tag_ids = np.where(rng.random((2, 6)) < 0.3, -100, rng.integers(0, 5, size=(2, 6)))
    qa = rng.normal(size=(3, 7, 2)).astype(np.float32)
    qa_pos = rng.integers(0, 7, size=(3, 2))
    ce = losses.cross_entropy
    return {
        "mlm": (_old_nll, ce, mlm, mlm_ids),
        "classification": (_old_classification, ce, cls, cls_ids),
        "choice": (_old_classification, ce, choice, cls_ids % 3),
        "tagging": (_old_tagging, lambda x, y: ce(x, y, y >= 0), tags, tag_ids),
        "qa": (_old_qa, lambda x, y: ce(x, y, axis=1), qa, qa_pos),
    }


@pytest.mark.parametrize("case", ["mlm", "classification", "choice", "tagging", "qa"])
def test_cross_entropy_equals_each_old_copy_to_the_bit(case):
    old, new, logits, labels = _cases()[case]
    weights = np.random.default_rng(4).random(np.shape(old(logits, labels))).astype(np.float32)

    def total(f):  # a weighted sum: every position's gradient differs
        return jax.jit(jax.value_and_grad(lambda x: jnp.sum(weights * f(x, labels))))

    for f in (old, new):
        assert np.all(np.isfinite(f(logits, labels)))
    np.testing.assert_array_equal(jax.jit(new)(logits, labels), jax.jit(old)(logits, labels))
    (v_old, g_old), (v_new, g_new) = total(old)(logits), total(new)(logits)
    np.testing.assert_array_equal(v_new, v_old)
    np.testing.assert_array_equal(g_new, g_old)

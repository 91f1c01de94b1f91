"""Pretraining losses and metrics, as the original run_pretraining.py computes them.

Each takes an optional `denominator`: by default the batch's own (sum of weights + 1e-5 for MLM,
the number of sequences for SOP). The trainer passes the whole global batch's, so that the sums
over gradient-accumulation micro-batches add up to exactly the full-batch values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cross_entropy(logits, labels, weights=None, axis=-1):
    """-log softmax(logits)[label] along `axis` (in float32), times `weights` when given: the
    one masked cross-entropy of every loss here and of the fine-tuning tasks. The label's
    log-probability is picked with a one-hot select, as the reference's one-hot product: its
    gradient stays elementwise (`take_along_axis`'s is a scatter into a zero-filled [B, P, V]
    buffer), and a -inf logit (a padded option) adds no 0 * -inf NaN. A negative label picks
    nothing (0): mask such positions out with `weights`."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=axis)
    pick = jax.nn.one_hot(labels, logp.shape[axis], axis=axis, dtype=jnp.bool_)
    nll = -jnp.sum(jnp.where(pick, logp, 0.0), axis=axis)
    return nll if weights is None else nll * weights


def mlm_denominator(weights):
    return jnp.sum(weights.astype(jnp.float32)) + 1e-5


def mlm_loss(logits, label_ids, weights, denominator=None):
    """sum(w * nll) / (sum(w) + 1e-5) over the whole batch: a mean over real masked tokens."""
    weights = weights.astype(jnp.float32)
    denominator = mlm_denominator(weights) if denominator is None else denominator
    return jnp.sum(cross_entropy(logits, label_ids, weights)) / denominator


def mlm_accuracy(logits, label_ids, weights, denominator=None):
    weights = weights.astype(jnp.float32)
    denominator = mlm_denominator(weights) if denominator is None else denominator
    correct = (jnp.argmax(logits, axis=-1) == label_ids).astype(jnp.float32)
    return jnp.sum(weights * correct) / denominator


def sop_loss(logits, labels, denominator=None):
    """Mean softmax cross-entropy of the sentence-order (or next-sentence) labels."""
    denominator = labels.shape[0] if denominator is None else denominator
    return jnp.sum(cross_entropy(logits, labels)) / denominator


def sop_accuracy(logits, labels, denominator=None):
    denominator = labels.shape[0] if denominator is None else denominator
    return jnp.sum((jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32)) / denominator


def pretraining_loss(output, batch, denominators=None):
    """total = MLM + SOP (equal weights, as the reference), with the four metrics; MLM alone for a
    model without the sentence head. `batch` holds masked_lm_ids, masked_lm_weights and
    sentence_order_label; `denominators` {'mlm', 'sop'}."""
    d = denominators or {}
    ids, w = batch["masked_lm_ids"], batch["masked_lm_weights"]
    metrics = {
        "mlm_loss": mlm_loss(output.mlm_logits, ids, w, d.get("mlm")),
        "mlm_accuracy": mlm_accuracy(output.mlm_logits, ids, w, d.get("mlm")),
    }
    if output.sop_logits is None:
        return metrics["mlm_loss"], metrics
    labels = batch["sentence_order_label"]
    metrics["sop_loss"] = sop_loss(output.sop_logits, labels, d.get("sop"))
    metrics["sop_accuracy"] = sop_accuracy(output.sop_logits, labels, d.get("sop"))
    return metrics["mlm_loss"] + metrics["sop_loss"], metrics

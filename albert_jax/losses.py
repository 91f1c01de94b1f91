"""Pretraining losses and metrics, as the original run_pretraining.py computes them."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def mlm_loss(logits, label_ids, weights):
    """sum(w * nll) / (sum(w) + 1e-5) over the whole batch: a mean over real masked tokens."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    nll = -jnp.take_along_axis(logp, label_ids[..., None].astype(jnp.int32), axis=-1)[..., 0]
    weights = weights.astype(jnp.float32)
    return jnp.sum(weights * nll) / (jnp.sum(weights) + 1e-5)


def mlm_accuracy(logits, label_ids, weights):
    weights = weights.astype(jnp.float32)
    correct = (jnp.argmax(logits, axis=-1) == label_ids).astype(jnp.float32)
    return jnp.sum(weights * correct) / (jnp.sum(weights) + 1e-5)


def sop_loss(logits, labels):
    """Mean softmax cross-entropy of the sentence-order (or next-sentence) labels."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None].astype(jnp.int32), axis=-1))


def sop_accuracy(logits, labels):
    return jnp.mean((jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32))


def pretraining_loss(output, batch):
    """total = MLM + SOP (equal weights, as the reference), with the four metrics."""
    mlm = mlm_loss(output.mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
    sop = sop_loss(output.sop_logits, batch["sentence_order_label"])
    metrics = {
        "mlm_loss": mlm,
        "mlm_accuracy": mlm_accuracy(
            output.mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"]
        ),
        "sop_loss": sop,
        "sop_accuracy": sop_accuracy(output.sop_logits, batch["sentence_order_label"]),
    }
    return mlm + sop, metrics

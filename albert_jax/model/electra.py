"""ELECTRA replaced-token detection with ALBERT's factorized embeddings and cross-layer sharing.

A small generator (its own encoder, sharing layout and MLM head) fills the masked positions of
the usual n-gram-masked batch by sampling from its softmax; the discriminator (the ALBERT
backbone) then predicts for every non-padding token whether it was replaced. A sampled token
equal to the original counts as original. Loss = generator MLM loss + `weight` x discriminator
binary cross-entropy (+ SOP when the discriminator has the sentence head).

Parameter tree: the discriminator keeps the backbone's top-level paths, so a checkpoint of it
is an ordinary ALBERT backbone that fine-tuning and the converters read unchanged:

    embeddings/*                     word, position and token-type tables + LayerNorm: shared
    encoder/*, pooler/*              the discriminator (any sharing layout)
    discriminator/{dense,output}/*   dense H->H, activation, dense H->1
    sop/*                            optional sentence head on the discriminator
    generator/encoder/*              E->H_g projection and the generator's own layers
    generator/mlm/*                  dense H_g->E, LayerNorm(E), output bias; decoder tied to the
                                     shared word table
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from albert_jax.model.albert import ACTIVATIONS, AlbertModel, Dense, Encoder, MLMHead, _fold
from albert_jax.model.config import AlbertConfig, Execution
from albert_jax.model.flops import encoder_flops_per_token, mlm_head_flops
from albert_jax.model.losses import mlm_accuracy, mlm_denominator, mlm_loss, sop_accuracy, sop_loss

DEFAULT_WEIGHT = 50.0  # the discriminator loss's weight (ELECTRA's lambda)


def generator_config(
    disc: AlbertConfig, fraction: float = 0.25, layout: str = "all", num_layers: int = 0
) -> AlbertConfig:
    """The generator: `fraction` of the discriminator's width (hidden, heads, intermediate), the
    same embedding size E (the tables are shared), `num_layers` layers (0: the discriminator's)
    in its own sharing layout."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"electra.generator_fraction must be in (0, 1], got {fraction}")
    hidden = max(1, int(round(disc.hidden_size * fraction)))
    heads = max(1, int(round(disc.num_heads * fraction)))
    while hidden % heads:
        heads -= 1
    config = dataclasses.replace(
        disc,
        hidden_size=hidden,
        num_heads=heads,
        intermediate_size=max(1, int(round(disc.intermediate_size * fraction))),
        num_layers=num_layers or disc.num_layers,
        attention_groups=1,
        ffn_groups=1,
    )
    return config.with_layout(layout)


def corrupt(input_ids, positions, weights, sampled, original):
    """(discriminator input, replaced labels): `input_ids` with the sampled tokens written at the
    real masked positions (weight > 0), and 1 where a written token differs from the original,
    0 everywhere else. Padding slots of `positions` (weight 0) write nothing."""
    B, T = input_ids.shape
    where = jnp.where(weights > 0, positions, T)  # T: out of bounds, dropped
    rows = jnp.arange(B)[:, None]
    ids = input_ids.at[rows, where].set(sampled.astype(input_ids.dtype), mode="drop")
    changed = (sampled != original).astype(jnp.int32)
    labels = jnp.zeros_like(input_ids, jnp.int32).at[rows, where].set(changed, mode="drop")
    return ids, labels


@flax.struct.dataclass
class ElectraOutput:
    mlm_logits: jax.Array  # generator, at the masked positions [B, P, V]
    sampled: jax.Array  # the generator's samples there [B, P]
    labels: jax.Array  # replaced (1) or original (0), every position [B, T]
    disc_logits: jax.Array  # [B, T]
    sop_logits: jax.Array | None = None


class Generator(nn.Module):
    config: AlbertConfig  # generator_config(...)
    execution: Execution = Execution()

    def setup(self):
        self.encoder = Encoder(self.config, self.execution)
        self.mlm = MLMHead(self.config, self.execution)

    def __call__(self, x, attention_mask, positions, decode, rng, deterministic: bool):
        seq, _ = self.encoder(x, attention_mask, rng, deterministic, False)
        seq = jnp.take_along_axis(seq, positions[..., None].astype(jnp.int32), axis=1)
        return self.mlm(seq, decode)


class ElectraForPreTraining(AlbertModel):
    """The discriminator backbone (AlbertModel's paths) with the generator beside it."""

    generator_config: AlbertConfig | None = None
    sentence_head: bool = False

    def setup(self):
        super().setup()
        c, ex = self.config, self.execution
        self.generator = Generator(self.generator_config, ex)
        self.discriminator = DiscriminatorHead(c, ex)
        if self.sentence_head:
            self.sop = Dense(c, 2, ("hidden", None), execution=ex)

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        masked_positions=None,
        masked_lm_ids=None,
        masked_lm_weights=None,
        sample_key=None,
        deterministic: bool = True,
    ) -> ElectraOutput:
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = jnp.ones_like(input_ids)
        if masked_positions is None:  # init: one position, nothing replaced
            masked_positions = jnp.zeros((input_ids.shape[0], 1), jnp.int32)
        if masked_lm_weights is None:
            masked_lm_weights = jnp.zeros(masked_positions.shape, jnp.float32)
        if masked_lm_ids is None:
            masked_lm_ids = jnp.zeros(masked_positions.shape, jnp.int32)
        c = self.config
        use_dropout = not deterministic and (c.hidden_dropout > 0 or c.attention_dropout > 0)
        rng = self.make_rng("dropout") if use_dropout else None
        x = self.embeddings(input_ids, token_type_ids, _fold(rng, 0), deterministic)
        mlm_logits = self.generator(
            x, attention_mask, masked_positions, self.embeddings.attend, _fold(rng, 1),
            deterministic,
        )  # fmt: skip
        key = jax.random.key(0) if sample_key is None else sample_key
        # Integer samples: no gradient reaches the generator through them (stop_gradient only
        # keeps the softmax out of the backward pass).
        sampled = jax.random.categorical(key, jax.lax.stop_gradient(mlm_logits)).astype(jnp.int32)
        ids, labels = corrupt(
            input_ids, masked_positions, masked_lm_weights, sampled, masked_lm_ids
        )
        out = self.backbone(ids, token_type_ids, attention_mask, deterministic, False)
        disc_logits = self.discriminator(out.sequence_output)
        sop = self.sop(out.pooled_output).astype(jnp.float32) if self.sentence_head else None
        return ElectraOutput(mlm_logits, sampled, labels, disc_logits, sop)


class DiscriminatorHead(nn.Module):
    """dense H->H, the model's activation, dense H->1: one logit per token (float32)."""

    config: AlbertConfig
    execution: Execution = Execution()

    @nn.compact
    def __call__(self, x):
        c, ex = self.config, self.execution
        h = Dense(c, c.hidden_size, ("hidden", None), execution=ex, name="dense")(x)
        h = ACTIVATIONS[c.hidden_act](h)
        return Dense(c, 1, (None, None), execution=ex, name="output")(h)[..., 0].astype(jnp.float32)


# --- loss and metrics ---
def normalizers(batch) -> dict[str, jax.Array]:
    """Whole-global-batch denominators: real masked tokens, non-padding tokens, sequences."""
    return {
        "mlm": mlm_denominator(batch["masked_lm_weights"]),
        "tokens": jnp.sum(batch["input_mask"].astype(jnp.float32)),
        "sop": jnp.asarray(batch["input_ids"].shape[0], jnp.float32),
    }


def loss(out: ElectraOutput, batch, norms, weight: float = DEFAULT_WEIGHT):
    """(generator MLM + weight x discriminator BCE [+ SOP], metrics). The replaced-token counts
    are fractions of the batch's tokens, so micro-batches add up; `finish_metrics` turns them
    into precision and recall."""
    ids, w = batch["masked_lm_ids"], batch["masked_lm_weights"]
    mask = batch["input_mask"].astype(jnp.float32)
    y = out.labels.astype(jnp.float32)
    bce = optax.sigmoid_binary_cross_entropy(out.disc_logits, y)
    pred = (out.disc_logits > 0).astype(jnp.float32)
    per_token = lambda v: jnp.sum(mask * v) / norms["tokens"]  # noqa: E731
    same = (out.sampled == ids).astype(jnp.float32)
    metrics = {
        "mlm_loss": mlm_loss(out.mlm_logits, ids, w, norms["mlm"]),
        "mlm_accuracy": mlm_accuracy(out.mlm_logits, ids, w, norms["mlm"]),
        "disc_loss": per_token(bce),
        "disc_accuracy": per_token((pred == y).astype(jnp.float32)),
        "sampled_original": jnp.sum(w.astype(jnp.float32) * same) / norms["mlm"],
        "replaced": per_token(y),
        "disc_true_positive": per_token(pred * y),
        "disc_predicted": per_token(pred),
    }
    total = metrics["mlm_loss"] + weight * metrics["disc_loss"]
    if out.sop_logits is not None:
        labels = batch["sentence_order_label"]
        metrics["sop_loss"] = sop_loss(out.sop_logits, labels, norms["sop"])
        metrics["sop_accuracy"] = sop_accuracy(out.sop_logits, labels, norms["sop"])
        total = total + metrics["sop_loss"]
    return total, metrics


def finish_metrics(metrics: dict) -> dict:
    """Precision and recall on replaced tokens from the summed fractions (0 when undefined)."""
    m = dict(metrics)
    tp, predicted = m.pop("disc_true_positive"), m.pop("disc_predicted")
    m["disc_precision"] = jnp.where(predicted > 0, tp / jnp.maximum(predicted, 1e-12), 0.0)
    m["disc_recall"] = jnp.where(m["replaced"] > 0, tp / jnp.maximum(m["replaced"], 1e-12), 0.0)
    return m


def auc_inputs(out: ElectraOutput, batch) -> dict[str, jax.Array]:
    """Per-token discriminator logits and replaced labels (-1 at padding), which evaluation
    gathers on the host for `disc_auc` (a ranking over all tokens is no per-batch mean)."""
    real = batch["input_mask"] > 0
    return {
        "disc_token_logits": out.disc_logits,
        "disc_token_labels": jnp.where(real, out.labels, -1),
    }


def disc_auc(labels, scores) -> float:
    """Exact area under the ROC curve: the chance that a replaced token scores above an original
    one, ties counting half (Mann-Whitney U from average ranks). The reference's `disc_auc`
    (tf.metrics.auc of the sigmoid probabilities) approximates it with 200 thresholds and counts
    padding as originals scored 0; here only the given tokens count. Logits rank as their
    sigmoids do, without float32 saturation turning them into ties. NaN without both classes."""
    labels = np.asarray(labels).ravel() > 0
    scores = np.asarray(scores, np.float64).ravel()
    pos = int(labels.sum())
    neg = labels.size - pos
    if pos == 0 or neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2.0)[inverse]  # 1-based, tied values share the mean
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def train_flops_per_sequence(
    disc: AlbertConfig, gen: AlbertConfig, seq_len: int, predictions: int, sentence_head: bool
) -> float:
    """Forward + backward (3x forward) matmul FLOPs of both networks on one sequence: the
    generator's encoder and MLM head at the masked positions, the discriminator's encoder and its
    per-token head (+ pooler and SOP head)."""
    T, H = seq_len, disc.hidden_size
    forward = T * encoder_flops_per_token(gen, T) + mlm_head_flops(gen, predictions)
    forward += T * (encoder_flops_per_token(disc, T) + 2 * H * H + 2 * H)
    if sentence_head:
        forward += 2 * H * H + 2 * H * 2
    return 3.0 * forward

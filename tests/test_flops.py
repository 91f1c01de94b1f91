"""The FLOPs behind MFU (`albert_jax.train.metrics`) against XLA's own count of the compiled
computation (`cost_analysis()['flops']`).

Ours counts matmuls only; XLA also counts elementwise work (GELU, softmax, LayerNorm, the loss),
which at these sizes adds 1.2 % (measured: 1.0116 forward, 1.011 forward + backward), so the ratio
must lie in [1, 1.02]: forgetting the attention scores (+4 %), the E->H projection (+1.3 %), a
layer, or the backward's 2x all fall outside. XLA counts the body of a `while` loop once, so for
the scanned model its figure is that of a one-layer model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from albert_jax import AlbertConfig, Execution
from albert_jax.model.albert import AlbertForPreTraining, init_params
from albert_jax.model.flops import forward_flops_per_sequence, train_flops_per_sequence

B, T, P = 2, 64, 10
CONFIG = AlbertConfig(
    vocab_size=1000, embedding_size=128, hidden_size=256, num_layers=3, num_heads=4,
    intermediate_size=1024, max_position_embeddings=T, hidden_dropout=0.0, attention_dropout=0.0,
)  # fmt: skip


def xla_flops(config, grad: bool, scan: bool) -> float:
    model = AlbertForPreTraining(config, Execution(scan_layers=scan))
    params = init_params(model, jax.random.key(0))
    ids, pos = jnp.ones((B, T), jnp.int32), jnp.zeros((B, P), jnp.int32)

    def forward(p):
        out = model.apply({"params": p}, ids, masked_positions=pos)
        return out.mlm_logits.sum() + out.sop_logits.sum()

    cost = jax.jit(jax.grad(forward) if grad else forward).lower(params).compile().cost_analysis()
    return (cost[0] if isinstance(cost, list) else cost)["flops"]


@pytest.mark.parametrize("layout, grad", [("all", False), ("all", True), ("none", True)])
def test_flops_match_xla_cost_analysis(layout, grad):
    config = CONFIG.with_layout(layout)
    count = train_flops_per_sequence if grad else forward_flops_per_sequence
    ratio = xla_flops(config, grad, scan=False) / (B * count(config, T, P))
    assert 1.0 <= ratio <= 1.02, ratio


def test_xla_counts_a_scanned_layer_once():
    ratio = xla_flops(CONFIG, False, scan=True) / (
        B * forward_flops_per_sequence(CONFIG.replace(num_layers=1), T, P)
    )
    assert 1.0 <= ratio <= 1.02, ratio

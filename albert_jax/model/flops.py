"""Model FLOPs, for MFU and the benchmarks.

FLOPs are counted per layer *application*: a shared block applied L times costs L times, so the
usual 6 * parameters rule (which undercounts ALBERT ~12x) is not used. Attention is bidirectional:
QK^T and PV cost the full 2 * T * H each per token, nothing is halved.
"""

from __future__ import annotations

from albert_jax.model.config import AlbertConfig


def encoder_flops_per_token(c: AlbertConfig, seq_len: int) -> float:
    """Matmul FLOPs per token of the E->H projection and the L layer applications."""
    H, E, I, T = c.hidden_size, c.embedding_size, c.intermediate_size, seq_len  # noqa: E741
    per_layer = 2 * 4 * H * H + 2 * 2 * H * I + 2 * 2 * T * H  # q,k,v,o + FFN + QK^T, PV
    return (2 * E * H if c.has_projection else 0) + c.num_layers * per_layer


def mlm_head_flops(c: AlbertConfig, predictions: int) -> float:
    """The MLM head at `predictions` positions: dense H->E and the tied E->V decoder."""
    return predictions * (
        2 * c.hidden_size * c.embedding_size + 2 * c.embedding_size * c.vocab_size
    )


def forward_flops_per_sequence(c: AlbertConfig, seq_len: int, predictions: int) -> float:
    """Matmul FLOPs of one forward pass over one sequence with `predictions` MLM outputs."""
    H = c.hidden_size
    heads = mlm_head_flops(c, predictions) + 2 * H * H + 2 * H * 2  # + pooler, SOP
    return seq_len * encoder_flops_per_token(c, seq_len) + heads


def train_flops_per_sequence(c: AlbertConfig, seq_len: int, predictions: int) -> float:
    """Forward + backward (2x forward): 3x the forward FLOPs."""
    return 3.0 * forward_flops_per_sequence(c, seq_len, predictions)

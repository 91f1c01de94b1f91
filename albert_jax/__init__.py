"""albert-jax: ALBERT in JAX/Flax with every cross-layer sharing layout and one-function unsharing."""

from albert_jax import presets, sharing
from albert_jax.config import AlbertConfig
from albert_jax.model import (
    AlbertForPreTraining,
    AlbertModel,
    AlbertOutput,
    count_params,
    init_params,
)

__all__ = [
    "AlbertConfig",
    "AlbertForPreTraining",
    "AlbertModel",
    "AlbertOutput",
    "count_params",
    "init_params",
    "presets",
    "sharing",
]

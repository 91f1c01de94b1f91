"""albert-jax: ALBERT in JAX/Flax with every cross-layer sharing layout and one-function unsharing.

Public API: `AlbertConfig`, `Execution` (how a model runs), `AlbertModel`, `AlbertForPreTraining`,
`AlbertForMaskedLM` (no SOP head), `AlbertOutput`, `presets`, `count_params`, `init_params`,
`sharing`, `checkpoint`. Attributes load lazily so that light modules (`albert_jax.data`,
`albert_jax.text.tokenization`) do not import JAX and Flax in input workers.
"""

import importlib

_EXPORTS = {
    "AlbertConfig": "albert_jax.model.config",
    "Execution": "albert_jax.model.config",
    "checkpoint": "albert_jax.checkpoints.checkpoint",
    "AlbertModel": "albert_jax.model.albert",
    "AlbertForPreTraining": "albert_jax.model.albert",
    "AlbertForMaskedLM": "albert_jax.model.albert",
    "AlbertOutput": "albert_jax.model.albert",
    "count_params": "albert_jax.model.albert",
    "init_params": "albert_jax.model.albert",
    "presets": "albert_jax.model.presets",
    "sharing": "albert_jax.model.sharing",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'albert_jax' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    return module if module.__name__.endswith(name) else getattr(module, name)

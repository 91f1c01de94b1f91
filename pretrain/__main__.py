r"""Pretraining entry point: `python -m pretrain --config configs/pretrain/NAME.py --workdir DIR`.

Until the trainer lands (its own issue), this runs the pipeline end to end without updating the
model: tokenizer + corpus (built once under the workdir), the grain input pipeline, and the
initialized model's jitted forward pass and pretraining loss on a few real batches. A fresh model's
MLM loss sits near ln(vocab) and its accuracies near chance; the trainer will move them.
"""

from __future__ import annotations

import json
import math
import time

import jax
import jax.numpy as jnp
from absl import app, flags
from ml_collections import config_flags

from albert_jax import AlbertForPreTraining, presets
from albert_jax.data import corpus
from albert_jax.data.pipeline import make_iterator, resolve_paths
from albert_jax.losses import pretraining_loss
from albert_jax.model import init_params

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (data and outputs live here).")
_BATCHES = flags.DEFINE_integer("batches", 3, "Batches to evaluate the initialized model on.")


def model_config(config):
    m = config.model
    overrides = {k: v for k, v in m.items() if k != "preset"}
    return presets.get(m.preset, **overrides)


def main(argv):
    del argv
    if _CONFIG.value is None or _WORKDIR.value is None:
        raise app.UsageError("--config and --workdir are required")
    config = _CONFIG.value
    data = resolve_paths(config.data, _WORKDIR.value)
    print(json.dumps({"data": corpus.build(data)}), flush=True)

    cfg = model_config(config)
    model = AlbertForPreTraining(cfg)
    params = init_params(model, jax.random.PRNGKey(int(data.seed)))
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    print(f"model {config.model.preset} layout={cfg.layout}: {n_params / 1e6:.2f}M parameters")

    @jax.jit
    def evaluate(params, batch):
        out = model.apply(
            {"params": params},
            batch["input_ids"],
            batch["segment_ids"],
            batch["input_mask"],
            masked_positions=batch["masked_lm_positions"],
        )
        return pretraining_loss(out, batch)

    it = make_iterator(data, model_vocab_size=cfg.vocab_size)
    for i in range(_BATCHES.value):
        t0 = time.perf_counter()
        batch = {k: jnp.asarray(v) for k, v in next(it).items()}
        loss, metrics = jax.device_get(evaluate(params, batch))
        row = {"batch": i, "loss": float(loss), **{k: float(v) for k, v in metrics.items()}}
        row["seconds"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(row), flush=True)
    print(f"ln(vocab) = {math.log(cfg.vocab_size):.3f}: an untrained model's MLM loss is near it.")


if __name__ == "__main__":
    app.run(main)

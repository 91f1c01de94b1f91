r"""Pretraining: `python -m pretrain --config configs/pretrain/NAME.py --workdir DIR`.

Builds the tokenizer and the tokenized corpus under the workdir if they are missing (process 0;
the others wait), writes the resolved config into the workdir, and trains. Rerunning the same
command resumes from the newest readable checkpoint with exactly the next batches. A run that
reaches `total_steps` ends by writing `WORKDIR/model`: the final parameters as an albert_jax
checkpoint with the corpus tokenizer, read back from the newest train-state checkpoint by the same
code as `python -m albert_jax.convert WORKDIR OUT`.
"""

from __future__ import annotations

import json
import os

import jax
from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli
from albert_jax.data import corpus
from albert_jax.data.pipeline import resolve_paths
from albert_jax.train.metrics import log_to_file
from albert_jax.train.pretraining import PretrainingTask, write_model
from albert_jax.train.trainer import maybe_initialize_distributed, train

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: data, checkpoints, metrics.")


def main(argv):
    del argv
    if _CONFIG.value is None or _WORKDIR.value is None:
        raise app.UsageError("--config and --workdir are required")
    config = _CONFIG.value
    if jax.process_index() == 0:  # library chatter (TFDS, orbax) to the log file, not the console
        log_to_file(os.path.join(_WORKDIR.value, "train.log"))
    maybe_initialize_distributed(config)
    data = resolve_paths(config.data, _WORKDIR.value)
    if jax.process_index() == 0:
        print(json.dumps({"data": corpus.build(data)}), flush=True)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("corpus built")
    train(config, _WORKDIR.value, PretrainingTask(config, data))
    if jax.process_index() == 0:
        write_model(_WORKDIR.value, int(config.total_steps))
    if jax.process_count() > 1:  # the others wait, so no process exits while it writes
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("model written")


if __name__ == "__main__":
    cli.run(main)

r"""Pretraining: `python -m pretrain --config configs/pretrain/NAME.py --workdir DIR`.

Builds the tokenizer and the tokenized corpus under the workdir if they are missing (process 0;
the others wait), writes the resolved config into the workdir, and trains. Rerunning the same
command resumes from the newest readable checkpoint with exactly the next batches. A run that
reaches `total_steps` ends by writing `WORKDIR/model`: the final parameters as an albert_jax
checkpoint with the corpus tokenizer, read back from the newest train-state checkpoint by the same
code as `python -m albert_jax.convert WORKDIR OUT`.

Continued pretraining (domain adaptation): `--config.init=SRC` starts from any checkpoint
`albert_jax.checkpoints.source` reads (ours, transformers, a Google TF1 checkpoint, a pretraining
workdir).
The model is then the checkpoint's (`config.model` is replaced by it), the corpus is tokenized
with the checkpoint's tokenizer (or `data.tokenizer_model`), and heads it lacks start fresh.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys

import jax
import ml_collections
from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli, paths
from albert_jax.data import corpus
from albert_jax.data.config import DataConfig
from albert_jax.data.pair_check import pair_warning
from albert_jax.data.pipeline import resolve_paths
from albert_jax.tasks.pretrain_config import PretrainConfig
from albert_jax.tasks.pretraining import (
    check_positions,
    clamp_warmup,
    make_task,
    set_objective_data,
    write_model,
)
from albert_jax.train import lock
from albert_jax.train.metrics import log_to_file
from albert_jax.train.optim import check_optim_config
from albert_jax.train.trainer import check_dtype, dtype_warning, maybe_initialize_distributed, train
from albert_jax.train.workdir import load_source

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: data, checkpoints, metrics.")


def start_from(config):
    """The checkpoint at `config.init`; `config.model` and `data.vocab_size` become its own, so
    that the workdir's config (and everything that reads it back) describes this model."""
    source = load_source(config.init)  # ours, transformers, Google TF1 or a pretraining workdir
    if source.tokenizer is None and not DataConfig.from_config(config.data).tokenizer_model:
        raise corpus.CorpusError(
            f"{config.init} has no tokenizer: name one with --config.data.tokenizer_model=PATH"
        )
    fields = dataclasses.asdict(source.config)
    with config.unlocked():
        config.model = ml_collections.ConfigDict({"preset": "albert-base", **fields})
        config.data.vocab_size = source.config.vocab_size
    print(
        f"continued pretraining from {source.location}: {source.config.layout} layout", flush=True
    )
    return source


def steps_for_budget(config, task) -> None:
    """total_steps (and a schedule that refers to it) from `config.train_flops`: the steps whose
    training FLOPs (both networks for ELECTRA, `task.flops_per_example`) come closest."""
    per_step = task.flops_per_example() * task.global_batch_size
    steps = max(1, round(float(config.train_flops) / per_step))
    config.total_steps = config.optim.total_steps = steps
    print(
        f"train_flops {config.train_flops:.3g}: {steps} steps of {per_step:.3g} FLOPs", flush=True
    )


def main(argv):
    del argv
    if _CONFIG.value is None or _WORKDIR.value is None:
        raise app.UsageError("--config and --workdir are required")
    config = _CONFIG.value
    # Contradictory settings fail before any work (the corpus build takes minutes).
    cli.check_workdir(_WORKDIR.value)
    set_objective_data(config)
    pretrain = PretrainConfig.from_config(config)
    budget = pretrain.train_flops > 0  # total_steps are only known after the build
    if not budget:
        clamp_warmup(
            config, "optim.warmup_steps" in config_flags.get_override_values(flags.FLAGS["config"])
        )
    check_optim_config(config.optim, None if budget else int(config.optim.total_steps))
    maybe_initialize_distributed(config)
    check_dtype(config.model.get("dtype"), config.model.get("param_dtype"))
    warning = dtype_warning(config.model.get("dtype"))
    if warning and jax.process_index() == 0:
        print(warning, flush=True)
    if not pretrain.init:  # else the model is the checkpoint's: checked once it is read
        check_positions(config)
    # One run per workdir (albert_jax/train/lock.py): two would build one corpus and mix
    # checkpoints. Held from here to the model written.
    with (
        cli.removed_on_input_error(_WORKDIR.value),
        lock.hold(paths.resolve(_WORKDIR.value), enabled=jax.process_index() == 0),
    ):
        _pretrain(config)


def _pretrain(config):
    if jax.process_index() == 0:  # library chatter (TFDS, orbax) to the log file, not the console
        log_to_file(_WORKDIR.value)
    pretrain = PretrainConfig.from_config(config)
    source = start_from(config) if pretrain.init else None
    if source is not None:
        check_positions(config)
    data = resolve_paths(config.data, _WORKDIR.value)
    if jax.process_index() == 0:
        tok = source.tokenizer if source is not None else None
        summary = corpus.build(data, tokenizer=tok, source=pretrain.init)
        print(json.dumps({"data": summary}), flush=True)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("corpus built")
    task = make_task(config, data, pretrained=source)
    task.check_eval_split()
    warning = pair_warning(task.sentence_head, task.data) if jax.process_index() == 0 else None
    if warning:  # before the start line; train.log keeps it too
        print(warning, file=sys.stderr, flush=True)
        logging.info(warning)
    if pretrain.train_flops > 0:
        steps_for_budget(config, task)
    train(config, _WORKDIR.value, task)
    if jax.process_index() == 0:
        write_model(_WORKDIR.value, int(config.total_steps))
    if jax.process_count() > 1:  # the others wait, so no process exits while it writes
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("model written")


if __name__ == "__main__":
    cli.run(main)

r"""Pretraining: `python -m pretrain --config configs/pretrain/NAME.py --workdir DIR`.

Builds the tokenizer and the tokenized corpus under the workdir if they are missing (process 0;
the others wait), writes the resolved config into the workdir, and trains. Rerunning the same
command resumes from the newest readable checkpoint with exactly the next batches. A run that
reaches `total_steps` ends by writing `WORKDIR/model`: the final parameters as an albert_jax
checkpoint with the corpus tokenizer, read back from the newest train-state checkpoint by the same
code as `python -m albert_jax.convert WORKDIR OUT`.

Continued pretraining (domain adaptation): `--config.init=SRC` starts from any checkpoint
`albert_jax.train.workdir.load_source` reads (ours, transformers, a Google TF1 checkpoint, a
pretraining workdir). The model is then the checkpoint's (the run's plan replaces `model` in the
workdir's config.json), the corpus is tokenized with the checkpoint's tokenizer (or
`data.tokenizer_model`), and heads it lacks start fresh.

What the run derives (the objective's pairs, a warmup clamped to a short run, a FLOPs budget's
steps, the checkpoint's model) goes into its `albert_jax.train.config.Plan`; the config stays as
given.
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
from albert_jax.data.pretraining import corpus
from albert_jax.data.pretraining.config import DataConfig
from albert_jax.data.pretraining.pair_check import pair_warning
from albert_jax.data.pretraining.pipeline import check_positions, resolve_paths
from albert_jax.model import presets
from albert_jax.model.config import Execution
from albert_jax.tasks.pretrain_config import PretrainConfig
from albert_jax.tasks.pretraining import (
    clamp_warmup,
    make_task,
    objective_leaves,
    write_model,
)
from albert_jax.train import lock, trackers
from albert_jax.train.config import Plan, TrainerConfig
from albert_jax.train.metrics import log_to_file
from albert_jax.train.optim import OptimConfig
from albert_jax.train.trainer import check_dtype, dtype_warning, maybe_initialize_distributed, train
from albert_jax.train.workdir import load_source

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: data, checkpoints, metrics.")


def start_from(config):
    """The checkpoint at `config.init`, and the plan's leaves that make the workdir's config.json
    describe it: `model` and `data.vocab_size` become its own (everything that reads the workdir
    back builds this model)."""
    source = load_source(config.init)  # ours, transformers, Google TF1 or a pretraining workdir
    if source.tokenizer is None and not DataConfig.from_config(config.data).tokenizer_model:
        raise corpus.CorpusError(
            f"{config.init} has no tokenizer: name one with --config.data.tokenizer_model=PATH"
        )
    model = ml_collections.ConfigDict(
        {"preset": "albert-base", **dataclasses.asdict(source.config)}
    )
    print(
        f"continued pretraining from {source.location}: {source.config.layout} layout", flush=True
    )
    return source, {"model": model, "data.vocab_size": source.config.vocab_size}


def main(argv):
    del argv
    if _CONFIG.value is None or _WORKDIR.value is None:
        raise app.UsageError("--config and --workdir are required")
    config = _CONFIG.value
    # Contradictory settings fail before any work (the corpus build takes minutes). What the
    # run derives goes into its plan; the config stays as given.
    cli.check_workdir(_WORKDIR.value)
    plan = Plan.of(config).with_leaves(**objective_leaves(config))
    pretrain = PretrainConfig.from_config(config)
    budget = pretrain.train_flops > 0  # total_steps are only known after the build
    if not budget:
        given = "optim.warmup_steps" in config_flags.get_override_values(flags.FLAGS["config"])
        plan = plan.with_optim(**clamp_warmup(config, given))
    optim = plan.optim_config(config)
    OptimConfig.from_config(optim).check(None if budget else int(optim.total_steps))
    maybe_initialize_distributed(config)
    model = presets.from_run_config(config)
    execution = Execution.from_config(config.execution)
    check_dtype(execution.dtype, execution.param_dtype)
    trackers.check(TrainerConfig.from_config(config).trackers)  # wandb missing: here
    warning = dtype_warning(execution.dtype)
    if warning and jax.process_index() == 0:
        print(warning, flush=True)
    if not pretrain.init:  # else the model is the checkpoint's: checked once it is read
        check_positions(config.data, model)
    # One run per workdir (albert_jax/train/lock.py): two would build one corpus and mix
    # checkpoints. Held from here to the model written.
    with (
        cli.removed_on_input_error(_WORKDIR.value),
        lock.hold(paths.resolve(_WORKDIR.value), enabled=jax.process_index() == 0),
    ):
        _pretrain(config, plan)


def _pretrain(config, plan: Plan):
    if jax.process_index() == 0:  # library chatter (TFDS, orbax) to the log file, not the console
        log_to_file(_WORKDIR.value)
    pretrain, source = PretrainConfig.from_config(config), None
    if pretrain.init:
        source, leaves = start_from(config)
        plan = plan.with_leaves(**leaves)
        check_positions(config.data, source.config)
    run_config = plan.record(config)  # what the task reads: the config with the plan in it
    data = resolve_paths(run_config.data, _WORKDIR.value)
    if jax.process_index() == 0:
        tok = source.tokenizer if source is not None else None
        summary = corpus.build(data, tokenizer=tok, source=pretrain.init)
        print(json.dumps({"data": summary}), flush=True)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("corpus built")
    model = source.config if source is not None else presets.from_run_config(run_config)
    task = make_task(run_config, data, model, pretrained=source)
    task.check_eval_split()
    warning = pair_warning(task.sentence_head, task.data) if jax.process_index() == 0 else None
    if warning:  # before the start line; train.log keeps it too
        print(warning, file=sys.stderr, flush=True)
        logging.info(warning)
    if pretrain.train_flops > 0:  # the steps whose training FLOPs come closest to the budget
        per_step = task.flops_per_example() * task.global_batch_size  # ELECTRA: both networks
        steps = max(1, round(pretrain.train_flops / per_step))
        print(
            f"train_flops {pretrain.train_flops:.3g}: {steps} steps of {per_step:.3g} FLOPs",
            flush=True,
        )
        plan = plan.replace(total_steps=steps).with_optim(total_steps=steps)
        task.total_steps = steps  # the learned-nothing warning's run length
    train(config, _WORKDIR.value, task.job(), plan)
    if jax.process_index() == 0:
        write_model(_WORKDIR.value, plan.total_steps)
    if jax.process_count() > 1:  # the others wait, so no process exits while it writes
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("model written")


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

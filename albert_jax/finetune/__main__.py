r"""Fine-tuning: `python -m finetune --config configs/finetune/TASK.py --workdir DIR
[--config.init=SRC] [--config.unshare=all|attention|ffn] [--config.seeds=0,1,2]`.

SRC is our checkpoint or anything `python -m albert_jax.convert` reads (a transformers directory,
a Google TF1 checkpoint, a pretraining workdir), or `none`: the random-init control, every weight
fresh, with both `--config.tokenizer=TOKDIR` and `--config.model_from=SHAPE` (a checkpoint or
workdir whose config is used, not its weights, or a preset such as albert-base), e.g.
`--config.init=none --config.tokenizer=runs/cpu_small/model
--config.model_from=runs/cpu_small/model`.
tsv.py, ner.py and cloze.py search the learning rate on dev first (short trials over a grid by
model size; DIR/lr_search.json; `--config.optim.learning_rate` fixes one instead). The best dev
checkpoint is kept in DIR/best (our format, with its head and tokenizer: `python -m
finetune.predict --checkpoint DIR/best`), dev and test predictions of it in DIR/predictions,
metrics in DIR/metrics.jsonl and DIR/results.json; with several seeds each has its own DIR/seed_S
and DIR/summary.json holds mean ± std. Rerunning the command resumes.
"""

from __future__ import annotations

from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli, paths
from albert_jax.jobs import lr_search, run, start
from albert_jax.model.config import Execution
from albert_jax.tasks import finetuning
from albert_jax.train import lock, trackers
from albert_jax.train.config import TrainerConfig
from albert_jax.train.metrics import log_to_file
from albert_jax.train.trainer import check_dtype, dtype_warning

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: checkpoints, metrics, predictions.")


def main(argv):
    del argv
    if _CONFIG.value is None or _WORKDIR.value is None:
        raise app.UsageError("--config and --workdir are required")
    config, workdir = _CONFIG.value, _WORKDIR.value
    # Everything checkable is checked before anything is built or written.
    cli.check_workdir(workdir)
    finetuning.check_config(config)
    lr_search.check_config(config)
    execution = Execution.from_config(config.execution)
    check_dtype(execution.dtype, execution.param_dtype)
    trackers.check(TrainerConfig.from_config(config).trackers)  # wandb missing: here
    name = start.dataset_to_build(config)  # only at its default place: never the user's
    if name:
        from albert_jax.experiments import datasets  # only when a dataset is built

        out = config.task.prepare_dir
        print(f"building the {name} dataset in {out} (python -m finetune.prepare {name})")
        datasets.prepare(name, out)
    start.check_files(config)
    warning = dtype_warning(execution.dtype)
    if warning:
        print(warning, flush=True)
    # One run per workdir (albert_jax/train/lock.py), held before anything is written there.
    with cli.removed_on_input_error(workdir), lock.hold(paths.resolve(workdir)):
        start.check_rerun(config, workdir)  # a rerun resumes: with the same inputs
        log_to_file(workdir)  # library chatter off the console
        run.run(config, workdir)


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

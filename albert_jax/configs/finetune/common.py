"""What every fine-tuning config shares: the reference's fine-tuning recipe and trainer defaults.

Not a config itself; `sentiment.py`, `ner.py`, `seg.py` and `tsv.py` build on it. Optimizer: the
original `run_classifier.py` (AdamW, weight decay 0.01 except LayerNorm and biases, eps 1e-6,
global-norm clipping 1.0, linear warmup then linear decay to 0; LAMB with `optim.name=lamb`).

The random-init control (`init='none'`): the same recipe from fresh weights, every one drawn by
the model's own initializer (as `fresh_params='.*'` does), nothing read from a checkpoint but
its shape. Both required: `tokenizer`, the vocabulary (a tokenizer directory, a checkpoint or a
pretraining workdir; vocab_size is the tokenizer's), and `model_from`, the shape (a checkpoint or
pretraining workdir, its config only; a config.json of ours; or a preset such as `albert-base`).
"My checkpoint's architecture, but random":

  python -m finetune --config configs/finetune/sentiment.py --workdir runs/ft_sentiment_random \
      --config.init=none --config.tokenizer=runs/cpu_small/model \
      --config.model_from=runs/cpu_small/model

results.json and summary.json then say `"init": "none", "random_init": true`.
"""

import ml_collections
from ml_collections import config_dict

from albert_jax.model.config import Execution
from albert_jax.tasks.finetune_config import (
    FINETUNE_EVALS,
    FinetuneConfig,
    ModelOverrides,
    task_section,
)
from albert_jax.train.config import TrainerConfig, evals_section
from albert_jax.train.optim import OptimConfig


def use_prepared(c, name: str, ext: str) -> None:
    """Train / dev / test files of a `python -m finetune.prepare NAME` dataset (built on first
    use) under data/finetune/NAME, relative to the working directory. Only there: with any
    other file missing the run stops (it is never built over a user's own directory)."""
    d = f"data/finetune/{name}"
    c.task.update(train=f"{d}/train.{ext}", dev=f"{d}/dev.{ext}", test=f"{d}/test.{ext}")
    c.task.update(prepare=name, prepare_dir=d)


def use_new_task_defaults(c) -> None:
    """Defaults for a task nobody tuned for (tsv.py, ner.py, cloze.py, suite.py).

    The learning rate searched on dev (`albert_jax.jobs.lr_search`: short trials over a
    grid by model size, hidden <= 256: 3e-5 / 1e-4 / 3e-4; >= 768: 1e-5 / 2e-5 / 5e-5; the best
    trial that did not collapse wins; when all collapsed, they run again twice as long) and
    the head's multiplier chosen by model size (`albert_jax.jobs.run.auto_learning_rate`:
    hidden <= 256: x10, >= 768: x1). A value passed on the command line is kept and not
    searched (`--config.optim.lr_multipliers=''`: no multiplier);
    `--config.lr_search.enabled=False` takes the rate by model size instead (hidden <= 256:
    3e-4; >= 768: 2e-5).

    At least 800 steps (`min_steps`): the fewest the ALBERT paper fine-tunes any task for
    (RTE's 2.5k and MRPC's 3.7k examples, Table 14, about 10 and 7 epochs at batch 32), so a
    small training set gets more epochs than `num_epochs` (`--config.min_steps=0`: off)."""
    c.optim.learning_rate = config_dict.placeholder(float)  # None: searched (or by model size)
    c.optim.lr_multipliers = config_dict.placeholder(str)  # None: by model size
    c.lr_search.enabled = True
    c.min_steps = 800


def get_common(task_type: str) -> ml_collections.ConfigDict:
    # The trainer's and fine-tuning's leaves, documented where their defaults live
    # (albert_jax/train/config.py, albert_jax/tasks/finetune_config.py).
    c = TrainerConfig.section()
    c.update(FinetuneConfig.section())
    c.eval_batch_size = 64
    c.total_steps = 0  # > 0 overrides num_epochs
    c.eval_every = 0  # 0: once per epoch
    c.checkpoint_every = 0  # 0: at every evaluation
    c.keep_checkpoints = 1
    c.log_every = 20
    # What is evaluated when (albert_jax/train/config.py: EvalConfig): dev at every evaluation
    # (`eval_every`), dev and test at the end with the best parameters. E.g.
    # --config.evals.dev.every=100, --config.evals.test.every=500 (test during training too).
    c.evals = evals_section(FINETUNE_EVALS)
    # Model overrides (None keeps the checkpoint's value) and the head's dropout, documented in
    # albert_jax/tasks/finetune_config.py (ModelOverrides).
    c.model = ModelOverrides.section()
    # How the model runs (`albert_jax.model.config.Execution`, where the leaves are documented).
    c.execution = Execution.section()
    # Unrolled layers: at fine-tuning depths (12-24) compiling them is cheap, and XLA then fuses
    # the backward pass far better than through nn.scan (on CPU, albert-base: 3.82 s a step
    # unrolled, 4.23 s scan + save_dots, 4.89 s scan; transformers' Flax model 3.99 s;
    # benchmarks/finetune_step.py). Same numbers either way.
    c.execution.scan_layers = False
    c.optim = OptimConfig.section()
    c.optim.name = "adamw"
    c.optim.learning_rate = 2e-5  # use_new_task_defaults: on dev (tsv.py, ner.py, cloze.py)
    c.optim.end_lr = 0.0
    c.optim.power = 1.0
    # The task's leaves: its kind's and the classification and tagging ones, documented where
    # their defaults live (albert_jax/tasks/finetune_config.py).
    c.task = task_section(task_type)
    return c

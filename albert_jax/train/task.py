"""The one task interface: what `albert_jax.train.trainer.train` needs from a job, after t5x's
`BaseModel`. Pretraining (`albert_jax.tasks.pretraining`) and every fine-tuning task
(`albert_jax.tasks.finetuning.FinetuneTask` and its subclasses) implement it; the trainer knows
no task by name and calls every member directly: the optional ones have their defaults here.

Evaluation is split as big_vision's evaluators are: `predict(run, split)` runs the model over a
split and returns its predictions (host arrays, generated texts, per-batch metrics), and
`score(split, predictions)` turns them into metrics without touching the model. `evaluate`
chains the two; a task adds what it does with the predictions (fine-tuning writes them).

Losses and metrics are sums over the examples a call is given divided by `normalizers` of the
whole global batch, so the micro-batch contributions of gradient accumulation add up to exactly
the full-batch values.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import flax.linen as nn
import jax

from albert_jax.model import sharing


class Task(abc.ABC):
    """A job for the trainer. Subclasses set `model_config` (an `AlbertConfig`), `model`,
    `global_batch_size` and `seq_length` (for tokens/s) and define the abstract methods."""

    model_config: Any
    model: nn.Module
    global_batch_size: int
    seq_length: int

    # --- optional members: the defaults are what a task without the feature means
    progress_keys: tuple[str, ...] | None = None  # metrics on the progress bar (None: all)
    # (name, 'max' | 'min'): keep the best model checkpoint by this eval metric (`save_model`)
    best_metric: tuple[str, str] | None = None
    final_splits: tuple[str, ...] = ()  # evaluated with the best parameters at the end
    fresh_params: tuple[str, ...] = ()  # regexes of paths that start fresh even if loaded
    init_source: str = "pretrained weights"  # what `pretrained_params` are, for the log line
    # Fields written into results.json beside the scores (e.g. `init`); a task that adds to it
    # sets its own dict.
    results_info: Mapping[str, Any] = MappingProxyType({})

    # --- training
    @abc.abstractmethod
    def dummy_batch(self) -> dict[str, Any]:
        """`model.init` keyword arguments."""

    @abc.abstractmethod
    def normalizers(self, batch) -> dict[str, jax.Array]:
        """The whole global batch's denominators of `loss`."""

    @abc.abstractmethod
    def loss(self, params, batch, norms, rng) -> tuple[jax.Array, dict]:
        """(loss, metrics) of `batch` (rng None: evaluation, no dropout)."""

    @abc.abstractmethod
    def train_iterator(self, process_index: int, process_count: int):
        """This process's training batches (checkpointable, e.g. grain)."""

    @abc.abstractmethod
    def flops_per_example(self) -> float:
        """Training FLOPs (forward + backward) of one example."""

    def finish_metrics(self, metrics: dict) -> dict:
        """Metrics formed after the micro-batch sums (ratios); none by default."""
        return metrics

    def model_configs(self) -> tuple[Any, ...]:
        """Every network's config (their dtypes are checked): `model_config` alone by default."""
        return (self.model_config,)

    def stacked_paths(self) -> frozenset[str]:
        """The parameter leaves with a leading layer/group axis (`model_config`'s layout)."""
        return sharing.stacked_paths(self.model_config)

    def pretrained_params(self) -> dict[str, Any] | None:
        """{path: array} to start from when not resuming; None: the model's initialization."""
        return None

    # --- evaluation
    @abc.abstractmethod
    def eval_step(self, params, batch) -> Any:
        """The model's outputs for an evaluation batch (jitted by the trainer)."""

    @abc.abstractmethod
    def predict(self, run: Callable, split: str | None = None) -> Any:
        """The predictions of `split` (None: the task's evaluation split). `run(local_batch)`
        returns eval_step's outputs for the global batch on the host; `run.params` are the
        parameters evaluated (for tasks that drive the model themselves: generation)."""

    @abc.abstractmethod
    def score(self, split: str | None, predictions) -> Any:
        """The metrics of `predict`'s predictions of `split` (no model call)."""

    def evaluate(self, run: Callable, step: int, split: str | None = None) -> dict[str, float]:
        """The metrics of `split` at `step`: `score(split, predict(run, split))`."""
        del step
        return self.score(split, self.predict(run, split))

    def on_evaluation(self, params, step: int) -> None:
        """Called on every process after each training-time evaluation with the parameters
        evaluated (fine-tuning's layer drift); nothing by default."""
        del params, step

    def save_model(self, path: str, params, info: dict) -> None:
        """Writes a model checkpoint (the best one, with `best_metric`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no model checkpoint")

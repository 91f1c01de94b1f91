"""What `albert_jax.train.trainer.train` runs: a `Job`, whose roles are kept apart.

- `Task`, the task model (after t5x's `BaseModel`): the network, its loss over a batch and its
  evaluation step. The compiled train and eval steps need nothing else.
- `Evaluator` (after big_vision's evaluators): `predict(run, split)` runs the model over a
  split and returns its predictions (host arrays, generated texts, per-batch metrics);
  `score(split, predictions)` turns them into metrics (a dict of floats) without touching the
  model; `check` may say more about them (fine-tuning: a warning when they collapsed). What is
  written of a final split's predictions is the job's (`Callbacks.write_predictions`).
- The data side: the training batches, the global batch size, the sequence length and the
  training FLOPs of one example.
- `Start`: the weights a run starts from when it does not resume.
- `Callbacks`: what a job adds to a run (fine-tuning keeps its best model, logs layer drift,
  writes the readable predictions of its final splits).

What is evaluated when is the config's `evals` (`albert_jax.train.config.EvalConfig`, by name;
a `Job`'s `evals` are the defaults of a config without the section).

Pretraining (`albert_jax.tasks.pretraining`) and every fine-tuning task
(`albert_jax.tasks.finetuning`) build their `Job` (`job()`); the trainer knows no task by name.

Losses and metrics are sums over the examples a call is given divided by `normalizers` of the
whole global batch, so the micro-batch contributions of gradient accumulation add up to exactly
the full-batch values.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import flax.linen as nn
import jax

from albert_jax.model import sharing
from albert_jax.train.config import EvalConfig


class Task(abc.ABC):
    """The task model. Subclasses set `model_config` (an `AlbertConfig`), `execution` (an
    `Execution`: how `model` runs) and `model`."""

    model_config: Any
    execution: Any
    model: nn.Module

    @abc.abstractmethod
    def dummy_batch(self) -> dict[str, Any]:
        """`model.init` keyword arguments."""

    @abc.abstractmethod
    def normalizers(self, batch) -> dict[str, jax.Array]:
        """The whole global batch's denominators of `loss`."""

    @abc.abstractmethod
    def loss(self, params, batch, norms, rng) -> tuple[jax.Array, dict]:
        """(loss, metrics) of `batch` (rng None: evaluation, no dropout)."""

    def finish_metrics(self, metrics: dict) -> dict:
        """Metrics formed after the micro-batch sums (ratios); none by default."""
        return metrics

    @abc.abstractmethod
    def eval_step(self, params, batch) -> Any:
        """The model's outputs for an evaluation batch (jitted by the trainer)."""

    def stacked_paths(self) -> frozenset[str]:
        """The parameter leaves with a leading layer/group axis (`model_config`'s layout)."""
        return sharing.stacked_paths(self.model_config)


class Evaluator(abc.ABC):
    """Predictions of a split and their metrics."""

    # The split names `config.evals` may give it ('' = its evaluation split).
    splits: tuple[str, ...] = ("",)

    @abc.abstractmethod
    def predict(self, run: Callable, split: str | None = None) -> Any:
        """The predictions of `split` (None: the evaluation split). `run(local_batch)` returns
        eval_step's outputs for the global batch on the host; `run.params` are the parameters
        evaluated (for tasks that drive the model themselves: generation)."""

    @abc.abstractmethod
    def score(self, split: str | None, predictions) -> dict[str, float]:
        """The metrics of `predict`'s predictions of `split` (no model call)."""

    def sample(self, split: str | None, n: int) -> str | None:
        """The name of a split holding a fixed sample of `n` of `split`'s examples (the same
        sample every time), for `EvalConfig.sample`. Evaluators that cannot sample refuse."""
        raise ValueError(f"{type(self).__name__} scores whole splits only")

    def check(self, split: str | None, step: int, predictions, metrics: dict[str, float]) -> None:
        """After `score` at `step`: what is worth saying about the predictions beyond their
        metrics (fine-tuning: one warning line when they collapsed); nothing by default."""
        return None

    def evaluate(
        self,
        run: Callable,
        step: int,
        split: str | None = None,
        write: Callable[[str | None, Any], None] | None = None,
    ) -> dict[str, float]:
        """The metrics of `split` at `step`: `predict`, `score`, `check`; then `write(split,
        predictions)` when given (a final split's prediction writer)."""
        predictions = self.predict(run, split)
        metrics = self.score(split, predictions)
        self.check(split, step, predictions, metrics)
        if write is not None:
            write(split, predictions)
        return metrics


@dataclasses.dataclass(frozen=True)
class Start:
    """The weights a run starts from when it does not resume (none: the initialization)."""

    params: Callable[[], Mapping[str, Any] | None] = lambda: None  # {path: array}, read lazily
    fresh: tuple[str, ...] = ()  # regexes of paths that start fresh even if loaded
    source: str = "pretrained weights"  # what they are, for the log line


@dataclasses.dataclass(frozen=True)
class Callbacks:
    """What a job adds to a run; the defaults add nothing."""

    progress_keys: tuple[str, ...] | None = None  # metrics on the progress bar (None: all)
    # (name, 'max' | 'min'): keep the best parameters by this eval metric (`save_model`)
    best_metric: tuple[str, str] | None = None
    save_model: Callable[[str, Any, dict], None] | None = None  # (path, host params, info)
    # (split, predictions) of each final split, after its scoring: its readable predictions
    write_predictions: Callable[[str, Any], None] | None = None
    results_info: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # results.json
    # (params, step) after each training-time evaluation, on every process
    on_evaluation: Callable[[Any, int], None] | None = None


@dataclasses.dataclass(frozen=True)
class Job:
    """A task model, its data and evaluator, where it starts and what it adds to the run."""

    task: Task
    train_iterator: Callable[[int, int], Iterator]  # (process index, count) -> local batches
    global_batch_size: int
    seq_length: int  # for tokens/s
    flops_per_example: float  # training FLOPs (forward + backward) of one example
    evaluator: Evaluator | None = None
    # What it evaluates when its config has no `evals` section (`config.read_evals`): the
    # evaluation split every eval_every steps; a task's configs/*/common.py states the same.
    evals: Mapping[str, EvalConfig] = dataclasses.field(
        default_factory=lambda: {"eval": EvalConfig()}
    )
    start: Start = Start()
    callbacks: Callbacks = Callbacks()

"""The trainer's settings: one typed section, its defaults in one place, checked where built.

Every job's config (an ml_collections file: `configs/pretrain/common.py`,
`configs/finetune/common.py`) starts from `TrainerConfig.section()`, so each leaf below exists
and parses on the command line (`--config.log_every=10`); the trainer reads it back as a
`TrainerConfig` (`from_config`), never with a default of its own. The optimizer has its section
(`albert_jax.train.optim.OptimConfig`), the model its (`AlbertConfig`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import ml_collections

from albert_jax import errors
from albert_jax.sections import Section


class TrainConfigError(errors.InputError):
    """A trainer setting that cannot work (the message says what to change)."""


@dataclasses.dataclass(frozen=True)
class Distributed(Section):
    """`jax.distributed.initialize()`: also on when JAX_COORDINATOR_ADDRESS is set; on TPU pods
    and SLURM clusters leave the fields empty and JAX discovers them."""

    enabled: bool = False
    coordinator_address: str = ""
    num_processes: int = 0  # 0: discovered
    process_id: int = -1  # -1: discovered


@dataclasses.dataclass(frozen=True)
class TrainerConfig(Section):
    seed: int = 0
    total_steps: int = 125_000
    grad_accum_steps: int = 1  # micro-batches per step (the global batch is split into them)
    mesh_shape: tuple = (-1, 1, 1)  # ('data', 'fsdp', 'tensor'); -1 takes the remaining devices
    logical_rules: tuple = ()  # () = albert_jax.train.partitioning.DEFAULT_RULES
    slices: int = 1  # TPU slices (multi-slice): 'data' spans them over DCN, fsdp/tensor in one
    # XLA's persistent compilation cache: a directory or bucket path; '' = WORKDIR/
    # compilation_cache on GPU / TPU (off on CPU); 'none' = off
    compilation_cache_dir: str = ""
    profile_steps: str = ""  # 'START:END': a jax.profiler trace of them in WORKDIR/tensorboard
    log_every: int = 100
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    keep_checkpoint_every: int = 0  # also keep every K-th step (0: off)
    # Rerunning a command resumes from its newest readable checkpoint. True: delete the run's
    # outputs (checkpoints, best, metrics, results) and train from step 0 instead.
    start_over: bool = False
    eval_every: int = 5000  # 0: never
    peak_flops_per_device: float = 0.0  # for MFU, e.g. 275e12 (TPU v4 bf16), 989e12 (H100 bf16)
    progress_bar: bool = True
    # Where metrics go (albert_jax/train/trackers.py): jsonl (metrics.jsonl, required: resume
    # and the reports read it), tensorboard, wandb (the `wandb` extra); on the command line
    # comma-separated: --config.trackers=jsonl,tensorboard,wandb
    trackers: tuple = ("jsonl", "tensorboard")
    # A bucket workdir's metrics rows, TensorBoard events and train.log are copied into it at
    # every checkpoint and at least every this many seconds (at the next logged row); a kill
    # loses what came after the last copy. A local workdir is written as rows come.
    metrics_sync_s: float = 120.0
    wandb_project: str = ""  # '' = $WANDB_PROJECT, else 'albert-jax'
    distributed: Distributed = Distributed()

    def __post_init__(self):
        object.__setattr__(self, "mesh_shape", tuple(self.mesh_shape))
        object.__setattr__(self, "logical_rules", tuple(tuple(r) for r in self.logical_rules))
        # ml_collections parses `--config.trackers=a,b` as the 1-tuple ('a,b',)
        names = (self.trackers,) if isinstance(self.trackers, str) else self.trackers
        names = tuple(n.strip() for x in names for n in str(x).split(",") if n.strip())
        object.__setattr__(self, "trackers", names)
        self.profile_range()  # a bad spec fails here, before anything is built

    def profile_range(self) -> tuple[int, int] | None:
        """`profile_steps` as (START, END), or None when off."""
        spec = self.profile_steps
        if not spec:
            return None
        try:
            start, end = (int(x) for x in str(spec).split(":"))
        except ValueError:
            raise TrainConfigError(
                f"profile_steps {spec!r}: expected START:END, e.g. 10:15"
            ) from None
        if not 0 < start < end:
            raise TrainConfigError(f"profile_steps {spec!r}: expected 0 < START < END")
        return start, end


@dataclasses.dataclass(frozen=True)
class EvalConfig(Section):
    """One evaluator of `config.evals` (after big_vision's `config.evals`: named evaluators):
    which split is evaluated, how often during training, whether again at the end with the best
    parameters, and which of its metrics are kept (the trainer's `kept`). `config.evals` holds
    them by name (`evals_section`); the first name (in sorted order) that evaluates during
    training is the run's own evaluation: its rows are `eval` in metrics.jsonl and it picks the
    best model; the others' rows are `eval_NAME`. `results.json` holds each final one by name.

      --config.evals.dev.every=100      # dev every 100 steps instead of the plan's eval_every
      --config.evals.test.every=500     # test during training too
      --config.evals.dev.metrics=accuracy,collapsed
      --config.evals.dev.sample=500     # in training, 500 fixed dev examples; at the end, all
    """

    split: str = ""  # '' = the task's evaluation split (pretraining: `eval_split`)
    every: int = 0  # steps between evaluations in training; 0 = the plan's eval_every; -1 = none
    final: bool = False  # evaluated at the end with the best parameters (a job keeping one)
    metrics: str = ""  # comma-separated metric names kept; '' = all
    # > 0: the evaluations during training (and the learning-rate search's trials) score a
    # fixed sample of this many of the split's examples, the same for every run and seed (the
    # evaluator's `sample`); the final evaluation scores the whole split. 0 = the whole split.
    sample: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names kept (`metrics` split on commas); () keeps all."""
        return tuple(m for m in str(self.metrics).replace(" ", "").split(",") if m)


def evals_section(evals: Mapping[str, EvalConfig]) -> ml_collections.ConfigDict:
    """`config.evals`: the named evaluators as config leaves (what a job's config starts from,
    so that `--config.evals.NAME.every=N` parses)."""
    return ml_collections.ConfigDict({k: dataclasses.asdict(e) for k, e in evals.items()})


def read_evals(
    config, defaults: Mapping[str, EvalConfig], splits: tuple[str, ...]
) -> dict[str, EvalConfig]:
    """`config.evals` as typed evaluators, by name (sorted); a config without the section (one
    built in Python) gets the job's `defaults`, those of its configs/*/common.py. `splits`: the
    task's split names (an unknown one is an error naming its key)."""
    if "evals" not in config:
        evals = dict(defaults)
    else:
        evals = {name: EvalConfig.from_config(e) for name, e in config.evals.items()}
    for name, e in evals.items():
        if e.split not in splits:
            raise TrainConfigError(
                f"evals.{name}.split={e.split!r}: not a split of this task (one of {list(splits)})"
            )
        if not isinstance(e.every, int) or e.every < -1:
            raise TrainConfigError(
                f"evals.{name}.every={e.every!r}: expected steps, 0 (the plan's eval_every) or "
                "-1 (not during training)"
            )
        if not isinstance(e.sample, int) or e.sample < 0:
            raise TrainConfigError(
                f"evals.{name}.sample={e.sample!r}: expected a number of examples (0: all)"
            )
    return dict(sorted(evals.items()))


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run derives before it trains, kept beside the config it was given (which stays as
    given): how long it runs, how often it evaluates and checkpoints, its seed, and the leaves
    it resolved (fine-tuning's steps from epochs and searched rate, a warmup clamped to a short
    run, a FLOPs budget's steps, continued pretraining's model). The trainer runs the plan; the
    workdir's config.json is `record(config)`, so whatever reads a run back sees what it used."""

    total_steps: int
    eval_every: int
    checkpoint_every: int
    seed: int
    steps_per_epoch: int | None = None  # fine-tuning: batches of the training rows
    optim: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # resolved optim leaves
    leaves: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # others, by dotted path

    @classmethod
    def of(cls, config) -> Plan:
        """The plan a config states, nothing derived."""
        t = TrainerConfig.from_config(config)
        return cls(t.total_steps, t.eval_every, t.checkpoint_every, t.seed)

    def replace(self, **changes) -> Plan:
        return dataclasses.replace(self, **changes)

    def with_optim(self, **values) -> Plan:
        return self.replace(optim={**self.optim, **values})

    def with_leaves(self, **values) -> Plan:
        """`with_leaves(**{"data.mode": "nsp"})`: a leaf (or a whole section) of the record."""
        return self.replace(leaves={**self.leaves, **values})

    def optim_config(self, config) -> ml_collections.ConfigDict:
        """The optimizer section the run builds its optimizer from."""
        return self.record(config).optim

    def record(self, config) -> ml_collections.ConfigDict:
        """A copy of `config` with the plan's values in it (the workdir's config.json)."""
        record = config.copy_and_resolve_references()
        fields = dict(
            total_steps=self.total_steps, eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every, seed=self.seed,
        )  # fmt: skip
        if self.steps_per_epoch is not None:
            fields["steps_per_epoch"] = self.steps_per_epoch
        with record.unlocked():
            for key, value in fields.items():
                record[key] = value
            for key, value in self.optim.items():
                record.optim[key] = value
            for path, value in self.leaves.items():
                *parents, key = path.split(".")
                section = record
                for name in parents:
                    section = section[name]
                section[key] = value
        return record

"""What every fine-tuning task shares: the registry of task types, the data, the `FinetuneTask`
base (the `albert_jax.train.task.Task` interface) and the config checks (the starting point and
the checks before a run starts: `albert_jax.jobs.start`).

Each task type names a module in `TASK_MODULES` (classification and regression:
`albert_jax.tasks.classification`, tagging: `.tagging`, extractive QA: `.qa`, multiple choice:
`.choice`, relations: `.relation`, seq2seq: `.seq2seq`); a config names its task by that type.
Its `Task`, a `FinetuneTask` subclass, is the trainer's interface (loss, eval_step,
`rows_and_metrics(split, predictions)`, from which `score` (metrics) and `rows` (the readable
predictions) come, `predict(run, split)` when it drives the model itself); its `Reader`, a
`FinetuneReader` subclass built on the task's typed settings (`finetune_config.TaskSettings`,
the kind's subclass), is the data side `FinetuneData` uses before any task exists (`read`,
`featurize`, `head_fields`; `check_targets`, `training_examples` and `labels` have defaults).

`FinetuneData` reads `config.task` once into the kind's settings, reads the starting checkpoint
(anything `albert_jax.checkpoints.source` reads, or a pretraining workdir: `start.load_init`),
applies `unshare`, picks the tokenizer and has the reader read and featurize every split once.
`albert_jax.jobs.run.run(config, workdir)` trains one or several seeds (schedules, learning
rate) and summarizes them.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.data import tables
from albert_jax.data.finetuning import benchmarks
from albert_jax.data.finetuning import records as D
from albert_jax.model import sharing
from albert_jax.model.config import Execution
from albert_jax.model.flops import forward_flops_per_sequence
from albert_jax.model.heads import build_model
from albert_jax.scoring import metrics as M
from albert_jax.tasks.finetune_config import (
    FINETUNE_EVALS,
    TASK_SETTINGS,
    FinetuneConfig,
    FinetuneError,
    ModelOverrides,
    TaggingSettings,
    TaskSettings,
)
from albert_jax.tasks.init_source import RANDOM_INIT, blank_source, load_init
from albert_jax.train.config import TrainerConfig
from albert_jax.train.faults import crash_point
from albert_jax.train.optim import OptimConfig, regex_list
from albert_jax.train.task import Callbacks, Evaluator, Job, Start, Task
from albert_jax.train.trainer import to_host
from albert_jax.train.workdir import read_tokenizer

# Task type -> its module (the interface above), imported when a run names it: the modules
# import this one for `FinetuneTask` and `FinetuneReader`. (`finetune_config.TASK_SETTINGS`
# names each type's settings.)
TASK_MODULES = {
    "classification": "albert_jax.tasks.classification",
    "regression": "albert_jax.tasks.classification",
    "tagging": "albert_jax.tasks.tagging",
    "qa": "albert_jax.tasks.qa",
    "multiple_choice": "albert_jax.tasks.choice",
    "relation": "albert_jax.tasks.relation",
    "seq2seq": "albert_jax.tasks.seq2seq",
}
TASK_TYPES = tuple(TASK_MODULES)
INPUTS = ("input_ids", "token_type_ids", "attention_mask")
FRESH_HEAD = "^classifier/"  # every task's fresh head (the seq2seq task has none: nothing matches)
DRIFT_FILE = "drift.jsonl"  # an unshared run's layer drift per evaluation (`on_evaluation`)
log = logging.getLogger(__name__)


def task_module(task_type: str):
    """The module of a task type (TASK_MODULES)."""
    return importlib.import_module(TASK_MODULES[task_type])


# ---------------------------------------------------------------- the starting point and data


class FinetuneReader:
    """A task kind's data side (a task module's `Reader`), built on the task's settings (the
    kind's `TaskSettings` subclass): `FinetuneData` reads and featurizes every split with it
    before any task exists."""

    def __init__(self, settings: TaskSettings):
        self.settings = settings

    def read(self, path) -> tuple[list, dict]:
        """(examples, counts): a split's examples and counts for its stats line."""
        raise NotImplementedError

    def check_targets(self, examples) -> None:
        """Raises when a training example has no target (none checked by default)."""

    def training_examples(self, examples, path) -> tuple[list, list[str]]:
        """(the training split's examples to keep, notes): all by default."""
        return examples, []

    def labels(self, data: FinetuneData) -> list[str] | None:
        """The label list (`data.labels`), or None when the task has none (the default)."""
        return None

    def featurize(self, examples, data: FinetuneData) -> tuple[dict, dict]:
        """(features, stats): arrays [N, ...] (`INPUTS` and the task's targets) and counts
        (`examples`, `truncated`, ...)."""
        raise NotImplementedError

    def head_fields(self, data: FinetuneData) -> dict[str, Any]:
        """The head dict's task fields: its `type` and `num_labels` at least (the shared ones,
        e.g. `max_seq_length`, are added by `FinetuneData.head`)."""
        raise NotImplementedError


SAMPLE_SEED = 0  # the draw of every evaluation sample (`FinetuneData.sample`)


class FinetuneData:
    """Everything a run needs that does not depend on the seed: the model config, the starting
    weights, the tokenizer, the label list and the featurized splits."""

    def __init__(self, config, splits=None, source=None):
        """`splits`: the ones read (None: the task's, `TaskSettings.splits`); `source`: the
        starting point (a `Source`) instead of `config.init`'s."""
        self.settings = f = FinetuneConfig.from_config(config)  # read once, for every task
        self.task_type = task_type = config.task.type
        if task_type not in TASK_TYPES:
            raise FinetuneError(f"task.type must be one of {TASK_TYPES}, got {task_type!r}")
        self.module = task_module(task_type)
        # `config.task`, read once: the kind's settings, and its reader on them
        self.task_settings = t = TASK_SETTINGS[task_type].from_config(config.task)
        self.reader: FinetuneReader = self.module.Reader(t)
        self.random_init = f.init == RANDOM_INIT
        if source is not None:
            self.source, self.notes = source, []
        else:
            self.source, self.notes = load_init(
                f.init, f.unshare or "", tokenizer=f.tokenizer or "", model_from=f.model_from or ""
            )
        self.fresh_params = regex_list(f.fresh_params)
        # model overrides (a config built in Python may have no model section: none)
        model = config.model if "model" in config else {}
        self.classifier_dropout = float(ModelOverrides.from_config(model).classifier_dropout)
        self.model_config = self.source.config.replace(**ModelOverrides.encoder(model))
        # how it runs (a config built in Python may have no execution section: the defaults)
        self.execution = Execution.from_config(config.execution if "execution" in config else {})
        self.tokenizer = self._tokenizer(f)
        self.max_seq_length = int(t.max_seq_length)
        if self.max_seq_length > self.model_config.max_position_embeddings:
            raise FinetuneError(
                f"task.max_seq_length={self.max_seq_length} exceeds the model's "
                f"max_position_embeddings={self.model_config.max_position_embeddings}"
            )
        paths = {s: t.path(s) for s in (t.splits if splits is None else splits)}
        if not paths.get("train") and "train" in splits:
            raise FinetuneError("task.train is empty: name the training file")
        self._read_counts: dict[str, dict] = {}
        self.examples = {s: self._read(p, s) for s, p in paths.items() if p}
        for split, examples in self.examples.items():
            if not examples:  # a header only, or blank lines: nothing to train or score on
                raise D.DataError(f"task.{split} {paths[split]}: no examples")
        reader = self.reader
        if "train" in self.examples:
            reader.check_targets(self.examples["train"])
        skipped = 0
        if "train" in self.examples:
            # what must not be trained on as it reads (QA: answers not at their offsets)
            before = len(self.examples["train"])
            self.examples["train"], notes = reader.training_examples(
                self.examples["train"], paths["train"]
            )
            self.notes, skipped = self.notes + notes, before - len(self.examples["train"])
        limit = int(f.max_train_examples or 0)
        if limit and "train" in self.examples:
            self.examples["train"] = self.examples["train"][:limit]
        self.labels = reader.labels(self)
        self.features, self.stats = {}, {}
        for split, examples in self.examples.items():
            self.features[split], self.stats[split] = reader.featurize(examples, self)
            self.stats[split].update(self._read_counts.get(paths[split], {}))
        if skipped:
            self.stats["train"]["skipped"] = skipped

    def sample(self, split: str, n: int) -> str:
        """The name of a split of `n` of `split`'s examples (`EvalConfig.sample`), drawn once with
        a fixed seed, so every run, layout and seed scores the same ones, in file order; `split`
        itself when it has no more than `n` (or no file)."""
        examples = self.examples.get(split, ())
        if len(examples) <= n:
            return split
        name = f"{split}_sample{n}"
        if name not in self.features:
            keep = np.sort(np.random.default_rng(SAMPLE_SEED).choice(len(examples), n, False))
            self.examples[name] = [examples[i] for i in keep]
            self.features[name] = self.reader.featurize(self.examples[name], self)[0]
        return name

    def _tokenizer(self, config: FinetuneConfig):
        where = config.tokenizer
        tok = read_tokenizer(where) if where else self.source.tokenizer
        if tok is None:
            raise FinetuneError(
                f"{where or config.init} has no tokenizer: name one with --config.tokenizer=DIR"
            )
        if tok.vocab_size != self.model_config.vocab_size:
            raise FinetuneError(
                f"the tokenizer{' at ' + where if where else ''} has {tok.vocab_size} entries but "
                f"the model {config.init} has vocab_size={self.model_config.vocab_size}: they "
                "do not belong together"
            )
        return tok

    def _read(self, path, split: str = ""):
        try:
            examples, self._read_counts[path] = self.reader.read(path)
        except UnicodeDecodeError:  # a task module's own reader: named here, with its line
            raise D.not_utf8(path) from None
        except tables.ColumnError as e:  # a dataset's mapped column: named with its split
            raise tables.ColumnError(f"task.{split} {e}" if split else str(e)) from None
        return examples

    def head(self) -> dict[str, Any]:
        task = self.reader.head_fields(self)
        # the keys in the order heads have always had: type and num_labels, shared, the task's
        return {
            "type": task["type"],
            "num_labels": task["num_labels"],
            "classifier_dropout": self.classifier_dropout,
            "task_type": self.task_type,
            "max_seq_length": self.max_seq_length,
            **task,
        }


# ---------------------------------------------------------------- tasks


class FinetuneTask(Task, Evaluator):
    """What every fine-tuning task shares: the task model and evaluator of `data`, and the `job`
    the trainer runs (training batches, the starting weights, keeping the best model, the layer
    drift log). A task module's `Task` adds `targets`, `normalizers`, `loss`, `eval_step` and
    `rows_and_metrics(split, predictions)`: the readable predictions (`rows`, written for a final
    split) and the metrics (`score`, with `collapsed`) of one decoding; a task that drives the
    model itself, as generation does, also its own `predict`."""

    progress_keys = ("loss", "accuracy", "learning_rate")
    splits = ("train", "dev", "test")  # what `config.evals` may name (a task: and its extras)

    def __init__(self, config, data: FinetuneData, workdir: str | None = None):
        self.config, self.data = config, data
        self.splits = data.task_settings.splits  # what `config.evals` may name
        self.model_config, self.execution = data.model_config, data.execution
        self.head = data.head()
        self.model = build_model(self.model_config, self.head, self.execution)
        f = data.settings
        self.global_batch_size = int(f.batch_size)
        self.eval_batch_size = int(f.eval_batch_size or f.batch_size)
        self.seq_length = data.max_seq_length
        self.fresh_params = data.fresh_params
        self.init_source = data.source.location
        # In results.json (the trainer adds it): tables tell the random-init control apart.
        self.results_info = {"init": str(config.init), "random_init": data.random_init}
        self.workdir = workdir
        metric = M.best_metric_name(data.task_type, f.best_metric or None)
        self.best_metric = (metric, "max" if M.higher_is_better(metric) else "min")
        self.unshared = bool(f.unshare)

    @staticmethod
    def from_config(config, tokenizer, workdir=None, splits=None):
        """The task of `config.task.type` built from `config` and `tokenizer` alone: the model
        freshly initialized with the shape of `config.model_from` (a preset, checkpoint or
        config.json; `config.model` overrides it) and the tokenizer's vocabulary, the splits
        `config.task` names read and featurized. For tests and tools: `config.init` is not read
        (a run starts from it through `FinetuneData(config)`)."""
        source, _ = blank_source(
            tokenizer, FinetuneConfig.from_config(config).model_from or "albert-base"
        )
        return make_task(config, FinetuneData(config, splits, source=source), workdir)

    def job(self) -> Job:
        """The trainer's job: this task, its training batches and evaluation, the starting weights
        and the run-side callbacks."""
        callbacks = Callbacks(
            progress_keys=self.progress_keys,
            best_metric=self.best_metric,
            save_model=self.save_model,
            write_predictions=self.write_final,
            results_info=self.results_info,
            on_evaluation=self.on_evaluation,
        )
        start = Start(self.pretrained_params, self.fresh_params, self.init_source)
        return Job(
            self, self.train_iterator, self.global_batch_size, self.seq_length,
            self.flops_per_example(), evaluator=self, start=start, callbacks=callbacks,
            evals=FINETUNE_EVALS,
        )  # fmt: skip

    # --- the task model
    def dummy_batch(self):
        return {"input_ids": jnp.zeros((1, 8), jnp.int32)}

    def pretrained_params(self):
        from flax import traverse_util

        return traverse_util.flatten_dict(self.data.source.params, sep="/")

    def apply(self, params, batch, rng):
        return self.model.apply(
            {"params": params},
            *(batch[k] for k in INPUTS),
            deterministic=rng is None,
            rngs=None if rng is None else {"dropout": rng},
        ).logits

    def train_iterator(self, process_index, process_count):
        import grain

        feats = self.data.features["train"]
        n, B = len(feats["input_ids"]), self.global_batch_size
        if B % process_count:
            raise FinetuneError(f"batch_size {B} is not divisible by {process_count} processes")
        b = B // process_count
        seed = int(self.config.seed)

        @functools.lru_cache(maxsize=2)
        def order(epoch):  # a fresh permutation per epoch, a pure function of (seed, epoch)
            return np.random.default_rng([seed, epoch]).permutation(n)

        def load(k):  # global batch k, this process's rows of it
            pos = int(k) * B + process_index * b + np.arange(b)
            rows = np.array([order(e)[j] for e, j in zip(*np.divmod(pos, n), strict=True)])
            return {key: feats[key][rows] for key in (*INPUTS, *self.targets)}

        # No grain thread: a batch's gather is ~0.1-0.2 ms of the main thread, which the
        # trainer's DevicePrefetch already overlaps with the step before; a thread made no wall
        # time difference (resume would stay exact with one: grain counts returned batches).
        return iter(
            grain.MapDataset.range(2**40)
            .map(load)
            .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
        )

    def flops_per_example(self) -> float:
        return 3.0 * forward_flops_per_sequence(self.model_config, self.seq_length, 0)

    def save_model(self, path, params, info):
        checkpoint.save(
            path, self.model_config, params, tokenizer=self.data.tokenizer, info=info,
            head=self.head,
        )  # fmt: skip

    def predict(self, run, split=None):
        """eval_step's outputs for every example of `split` (`dev` unless named), in order; None
        for a split the task has no file for (scored {}, nothing written)."""
        name = split or "dev"
        if name not in self.data.features:
            return None
        return predict_all(run, self.data.features[name], self.eval_batch_size)

    def sample(self, split, n):
        return self.data.sample(split or "dev", n)

    def rows_and_metrics(self, split: str, predictions) -> tuple[list[dict], dict[str, float]]:
        """(rows, metrics) of `predict`'s predictions of `split`: the readable predictions and
        their metrics, from one decoding (QA's span search, generation's texts)."""
        raise NotImplementedError

    def score(self, split, predictions) -> dict[str, float]:
        """The metrics of the split (`dev` unless named) and `collapsed` (1.0 / 0.0: `collapse`);
        {} for a split without a file."""
        if predictions is None:
            return {}
        rows, values = self.rows_and_metrics(split or "dev", predictions)
        if values:
            values = {**values, "collapsed": float(self.collapse(rows, values) is not None)}
        return values

    def rows(self, split: str, predictions) -> list[dict]:
        """The readable predictions of `split`, one row per example (`workdir/predictions`)."""
        return self.rows_and_metrics(split, predictions)[0]

    def check(self, split, step, predictions, metrics) -> None:
        """One warning line (console and train.log) when the predictions collapsed (off in the
        learning-rate search's trials: `warn_collapse`). A split without gold (no metrics, so
        no `collapsed`) is checked here; a scored one only when `score` flagged it."""
        if predictions is None or not self.warn_collapse or jax.process_index() != 0:
            return
        if metrics and not metrics.get("collapsed"):
            return
        name = split or "dev"
        what = self.collapse(*self.rows_and_metrics(name, predictions))
        if what:
            log.warning(M.collapse_warning(name, step, what, self.config, self.head_pattern))

    def write_final(self, split: str, predictions) -> None:
        """A final split's readable predictions: `workdir/predictions/SPLIT.jsonl`, and a
        benchmark's submission file for the split in `workdir/submission` (process 0; nothing
        without a workdir or for a split without a file)."""
        if predictions is None or not self.workdir or jax.process_index() != 0:
            return
        stem = paths.join(self.workdir, "predictions", split)
        rows = self.rows(split, predictions)
        self.write_predictions(stem, rows)
        self.write_submission(split, rows, paths.join(self.workdir, "submission"))
        crash_point("predictions")

    def write_submission(self, split: str, rows, out_dir: str) -> str | None:
        """The benchmark's submission file of `split`'s predictions in `out_dir` (`task.benchmark`
        names one and makes one of this split's file: `benchmarks.write_submission`); its path
        or None."""
        t = self.data.task_settings
        if not t.benchmark:
            return None
        path = benchmarks.write_submission(t.benchmark, t.path(split), rows, out_dir)
        if path:
            log.info("submission: %s (%d rows)", path, len(rows))
        return path

    def on_evaluation(self, params, step) -> None:
        """An unshared run (`unshare` set, from pretrained weights): at every evaluation, how
        far each layer of each sub-block has moved from the weights it started from and how
        alike the layers still are (`sharing.layer_drift`), one row of `workdir/drift.jsonl`
        (a step evaluated again on resume replaces its row and those after it). Other runs
        write nothing."""
        src = self.data.source.params
        if not (self.unshared and self.workdir and "encoder" in (src or {})):
            return
        encoder = to_host(  # an all-gather: every process takes part
            {b: params["encoder"][b] for b in sharing.SUB_BLOCKS}
        )
        if jax.process_index() != 0:
            return
        drift = sharing.layer_drift({"encoder": encoder}, src, self.model_config)
        # the run's epoch length (`run.schedule`: batches of the training rows; none
        # for a task built without its training split)
        train = self.data.features.get("train")
        per_epoch = train and max(1, math.ceil(len(train["input_ids"]) / self.global_batch_size))
        row = {"step": int(step), "epoch": step / per_epoch if per_epoch else None}
        for block, d in drift.items():
            row[f"{block}_distance"] = [float(x) for x in d["distance"]]
            row[f"{block}_similarity"] = float(d["similarity"])
        path = paths.join(self.workdir, DRIFT_FILE)
        rows = []
        if epath.Path(path).exists():
            with paths.open_text(path) as f:
                rows = [json.loads(x) for x in f if x.strip()]
        rows = [r for r in rows if r["step"] < step] + [row]
        paths.write_text(path, "".join(json.dumps(r) + "\n" for r in rows))

    def write_predictions(self, stem: str, rows) -> None:
        write_jsonl(stem + ".jsonl", rows)

    # The fresh head's parameters (for the multiplier named in the collapse warning; None: no
    # fresh head).
    head_pattern: str | None = FRESH_HEAD
    warn_collapse = True  # off in the learning-rate search's trials (their table says it)

    def collapse(self, rows, values) -> str | None:
        """What is degenerate about a split's predictions (`rows_and_metrics`), or None
        (`albert_jax.scoring.metrics.prediction_collapse` and its siblings)."""
        return None


def make_task(config, data: FinetuneData, workdir=None) -> FinetuneTask:
    return data.module.Task(config, data, workdir)


# ---------------------------------------------------------------- evaluation helpers


def predict_all(run, feats: dict[str, np.ndarray], batch_size: int, keys=INPUTS) -> np.ndarray:
    """`run` over every example once, in order: the last batch is padded (with copies of the
    first example) and the padding dropped. Each process feeds its rows of each global batch
    (the features `keys`)."""
    n = len(feats["input_ids"])
    P, p = jax.process_count(), jax.process_index()
    if batch_size % P:
        raise FinetuneError(f"eval_batch_size {batch_size} is not divisible by {P} processes")
    outs = []
    for lo in range(0, n, batch_size):
        idx = np.arange(lo, lo + batch_size)
        idx = np.where(idx < n, idx, 0).reshape(P, -1)[p]
        outs.append(np.asarray(run({k: feats[k][idx] for k in keys})))
    return np.concatenate(outs)[:n] if outs else np.zeros((0,))


def write_jsonl(path: str, rows) -> None:
    """All rows, then one rename: a reader never sees half a file."""
    epath.Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = path + ".tmp"
    with paths.open_text(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    epath.Path(tmp).replace(path)


# ---------------------------------------------------------------- config checks


def parse_seeds(config) -> list[int]:
    seeds = given = FinetuneConfig.from_config(config).seeds
    if isinstance(seeds, int):
        return [seeds]
    if isinstance(seeds, str):
        seeds = [s for s in seeds.replace(" ", "").split(",") if s]
    try:
        return [int(s) for s in seeds] or [int(config.seed)]
    except (TypeError, ValueError):
        raise FinetuneError(f"seeds={given!r}: expected integers (--config.seeds=0,1,2)") from None


MIN_SEQ_LENGTH = 3


def check_config(config) -> None:
    """What can be checked before anything is read, built or written: seeds, batch sizes, the
    schedule's settings and the optimizer (`OptimConfig.check`; the learning rate may
    still be auto, the total steps come from the epochs later)."""
    parse_seeds(config)
    f, t = FinetuneConfig.from_config(config), TrainerConfig.from_config(config)
    task_type = TaskSettings.from_config(config.task).type
    if task_type not in TASK_TYPES:
        raise FinetuneError(f"task.type must be one of {TASK_TYPES}, got {task_type!r}")
    task = TASK_SETTINGS[task_type].from_config(config.task)
    # 0: batch_size / from the epochs / none / once per epoch / at every evaluation / all
    lowest = {
        "batch_size": 1, "eval_batch_size": 0, "total_steps": 0, "min_steps": 0,
        "eval_every": 0, "checkpoint_every": 0, "log_every": 1, "max_train_examples": 0,
    }  # fmt: skip
    for key, low in lowest.items():
        value = getattr(f if hasattr(f, key) else t, key)
        if not isinstance(value, int) or value < low:
            raise FinetuneError(f"{key} must be an integer >= {low}, got {value!r}")
    # [CLS] [SEP] and at least one piece of text
    length = task.max_seq_length
    if not isinstance(length, int) or length < MIN_SEQ_LENGTH:
        raise FinetuneError(
            f"task.max_seq_length must be an integer >= {MIN_SEQ_LENGTH} ([CLS] text [SEP]), "
            f"got {length!r}"
        )
    try:
        metric = M.best_metric_name(task.type, f.best_metric or None)
    except ValueError as e:
        raise FinetuneError(f"best_metric: {e}") from None
    if metric == "f1" and task.type == "classification" and not task.positive:
        raise FinetuneError(
            "best_metric: 'f1' (one class's F1) needs task.positive, the class it is of (e.g. "
            "--config.task.positive=1); else choose one of accuracy, macro_f1, mcc"
        )
    if task.benchmark:
        benchmarks.get(task.benchmark)  # an unknown name: the error lists the known ones
    if isinstance(task, TaggingSettings) and task.scheme not in M.SCHEMES:  # else a KeyError
        raise FinetuneError(f"task.scheme must be one of {M.SCHEMES}, got {task.scheme!r}")
    for pattern in regex_list(f.fresh_params):
        try:
            re.compile(pattern)
        except re.error as e:
            raise FinetuneError(f"fresh_params: {pattern!r} is not a regex ({e})") from None
    f.check_epochs(t.total_steps)
    OptimConfig.from_config(config.optim).check(auto=True)

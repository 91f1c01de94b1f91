"""Fine-tuning tasks for the one trainer: sequence classification, regression, token tagging
(extractive QA: `albert_jax.tasks.qa`; multiple choice: `albert_jax.tasks.choice`).

`FinetuneData` reads the starting checkpoint (anything `albert_jax.checkpoints.source` reads, or a
pretraining workdir), applies `unshare`, picks the tokenizer and featurizes every split once;
`ClassificationTask` / `TaggingTask` (the `albert_jax.train.trainer.Task` interface) add the
head, the loss, the evaluation over whole splits (last batch padded and masked, metrics from the
gathered predictions) and the prediction files. `run(config, workdir)` trains one or several
seeds and summarizes them.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.source import (
    ConversionError,
    Source,
    describe,
    load_source,
    read_config,
    read_tokenizer,
)
from albert_jax.model import presets, sharing
from albert_jax.model.flops import forward_flops_per_sequence
from albert_jax.model.heads import build_model
from albert_jax.tasks import data as D
from albert_jax.tasks import metrics as M
from albert_jax.train import lock
from albert_jax.train.faults import crash_point
from albert_jax.train.optim import check_optim_config, path_matcher, regex_list
from albert_jax.train.trainer import train

# Task types that live in a module of their own. Such a module provides `read(path, t)` ->
# (examples, counts), `featurize(examples, data, t)` -> (features, stats), `head(data, t)` -> the
# head dict's task fields (its "type" and "num_labels" at least) and `Task`, a FinetuneTask; and
# optionally `training_examples(examples, path)` -> (the training split's examples to keep, notes).
TASK_MODULES = {
    "qa": "albert_jax.tasks.qa",
    "multiple_choice": "albert_jax.tasks.choice",
    "relation": "albert_jax.tasks.relation",
    "seq2seq": "albert_jax.tasks.seq2seq",
}
TASK_TYPES = ("classification", "regression", "tagging", *TASK_MODULES)
UNSHARE = {"": None, "all": ("attention", "ffn"), "attention": ("attention",), "ffn": ("ffn",)}
INPUTS = ("input_ids", "token_type_ids", "attention_mask")
FRESH_HEAD = "^classifier/"  # every task's fresh head (the seq2seq task has none: nothing matches)
log = logging.getLogger(__name__)


def task_module(task_type: str):
    """The module of a task type in TASK_MODULES (None for the types defined here)."""
    import importlib

    name = TASK_MODULES.get(task_type)
    return importlib.import_module(name) if name else None


class FinetuneError(ValueError):
    """A fine-tuning setup that cannot work (the message says what to change)."""


# ---------------------------------------------------------------- the starting point and data


RANDOM_INIT = "none"  # config.init: no checkpoint, every weight freshly initialized


def load_init(init: str, unshare: str = "", *, tokenizer: str = "", model_from: str = ""):
    """(Source, notes): the checkpoint at `init` with the named sub-blocks unshared. With
    `init='none'` (the random-init control) no weights are read: the Source has the shape of
    `model_from` (`random_init_source`), the tokenizer at `tokenizer` and no parameters, so the
    trainer keeps every leaf of the model's own initialization, as `fresh_params='.*'` does."""
    if not init:
        raise FinetuneError(
            "config.init is empty: name the checkpoint to fine-tune (ours, a transformers "
            "directory, a Google TF1 checkpoint or a pretraining workdir), or 'none' for random "
            "weights"
        )
    if unshare not in UNSHARE:
        raise FinetuneError(f"unshare must be one of {sorted(UNSHARE)}, got {unshare!r}")
    if init == RANDOM_INIT:
        source, notes = random_init_source(tokenizer, model_from)
    else:
        source, notes = load_source(init), []
    before = source.config.layout
    blocks = UNSHARE[unshare] or ()
    L = source.config.num_layers
    groups = {f"{b}_groups": L for b in blocks}
    if groups and source.params:
        source.params, source.config = sharing.regroup(source.params, source.config, **groups)
    elif groups:  # random weights: only the shape changes
        source.config = source.config.replace(**groups)
    notes += [f"layout {before} -> {source.config.layout}"] if groups else []
    return source, notes


def random_init_source(tokenizer: str, model_from: str):
    """(Source without parameters, notes) for `init='none'`: the model config of `model_from`
    (a checkpoint, pretraining workdir, config.json or preset: `convert.read_config`) with the
    vocabulary of the tokenizer directory `tokenizer`."""
    if not tokenizer:
        raise FinetuneError(
            "--config.init=none needs --config.tokenizer=DIR (a tokenizer directory, checkpoint "
            "or pretraining workdir, e.g. runs/cpu_small/model or runs/cpu_small/data/tokenizer):"
            " random weights come without a tokenizer"
        )
    if not model_from:
        raise FinetuneError(
            "--config.init=none needs --config.model_from=SRC for the model's shape: a "
            "checkpoint or pretraining workdir (its config only; e.g. runs/cpu_small/model), "
            f"its config.json, or a preset ({', '.join(presets.NAMES)})"
        )
    try:
        tok = read_tokenizer(tokenizer)
    except ConversionError as e:
        raise FinetuneError(f"--config.tokenizer: {e}") from e
    if tok is None:
        raise FinetuneError(f"--config.tokenizer={tokenizer}: no tokenizer there")
    try:
        config = read_config(model_from)
    except ConversionError as e:
        raise FinetuneError(
            f"--config.model_from: {e} (expected a checkpoint, pretraining workdir, config.json "
            f"or preset: {', '.join(presets.NAMES)})"
        ) from e
    vocab = []
    if config.vocab_size != tok.vocab_size:  # the embeddings are fresh: the tokenizer decides
        vocab = [f"vocab_size {config.vocab_size} -> {tok.vocab_size} (the tokenizer's)"]
        config = config.replace(vocab_size=tok.vocab_size)
    shape = f"the shape of {model_from} ({describe(config)}), tokenizer {tokenizer}"
    notes = [f"random init (init=none): {shape}", *vocab]
    location = f"random weights (init=none, shape of {model_from})"
    return Source(config, {}, tok, RANDOM_INIT, location), notes


class FinetuneData:
    """Everything a run needs that does not depend on the seed: the model config, the starting
    weights, the tokenizer, the label list and the featurized splits."""

    def __init__(self, config, splits=("train", "dev", "test")):
        t = config.task
        self.task_type = t.type
        if t.type not in TASK_TYPES:
            raise FinetuneError(f"task.type must be one of {TASK_TYPES}, got {t.type!r}")
        self.module = task_module(t.type)
        self.random_init = config.init == RANDOM_INIT
        self.source, self.notes = load_init(
            config.init,
            config.get("unshare", "") or "",
            tokenizer=config.get("tokenizer", "") or "",
            model_from=config.get("model_from", "") or "",
        )
        self.fresh_params = regex_list(config.get("fresh_params", ()))
        overrides = {k: v for k, v in config.get("model", {}).items() if v is not None}
        self.classifier_dropout = float(overrides.pop("classifier_dropout", 0.1))
        self.model_config = self.source.config.replace(**overrides)
        self.tokenizer = self._tokenizer(config)
        self.max_seq_length = int(t.max_seq_length)
        if self.max_seq_length > self.model_config.max_position_embeddings:
            raise FinetuneError(
                f"task.max_seq_length={self.max_seq_length} exceeds the model's "
                f"max_position_embeddings={self.model_config.max_position_embeddings}"
            )
        paths = {s: t.get(s, "") for s in splits}
        if not paths.get("train") and "train" in splits:
            raise FinetuneError("task.train is empty: name the training file")
        self._read_counts: dict[str, dict] = {}
        self.examples = {s: self._read(p, t) for s, p in paths.items() if p}
        if "train" in self.examples:
            self._check_targets(self.examples["train"], t)
        skipped = 0
        if "train" in self.examples and hasattr(self.module, "training_examples"):
            # what must not be trained on as it reads (QA: answers not at their offsets)
            before = len(self.examples["train"])
            self.examples["train"], notes = self.module.training_examples(
                self.examples["train"], paths["train"]
            )
            self.notes, skipped = self.notes + notes, before - len(self.examples["train"])
        limit = int(config.get("max_train_examples", 0) or 0)
        if limit and "train" in self.examples:
            self.examples["train"] = self.examples["train"][:limit]
        self.labels = self._labels(t)
        self.features, self.stats = {}, {}
        for split, examples in self.examples.items():
            self.features[split], self.stats[split] = self._featurize(examples, t)
            self.stats[split].update(self._read_counts.get(paths[split], {}))
        if skipped:
            self.stats["train"]["skipped"] = skipped

    def _tokenizer(self, config):
        where = config.get("tokenizer", "")
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

    def _read(self, path, t):
        try:
            return self._read_file(path, t)
        except UnicodeDecodeError:  # a task module's own reader: named here, with its line
            raise D.not_utf8(path) from None

    def _read_file(self, path, t):
        if self.module is not None:
            examples, self._read_counts[path] = self.module.read(path, t)
            return examples
        if self.task_type == "tagging":
            return D.read_conll(path)
        return D.read_examples(
            path,
            text_a=t.text_a,
            text_b=t.get("text_b", "") or None,
            label=t.label,
            task_type=self.task_type,
        )

    def _check_targets(self, examples, t) -> None:
        """Every training example needs its label (tags): a file without the column reads as
        inputs to predict, and would fail inside the data pipeline (or blame the dev file)."""
        if self.module is not None:
            return
        for ex in examples:
            if isinstance(ex, D.TaggedExample) and ex.tags is None:
                raise D.DataError(
                    f"task.train {t.train}: {ex.where}: no tag column (training needs lines of "
                    "`word ... tag`, tab- or space-separated)"
                )
            if isinstance(ex, D.Example) and ex.label is None:
                raise D.DataError(
                    f"task.train {t.train}: {ex.where}: no {t.label!r} column; name the label "
                    "column with --config.task.label=COLUMN"
                )

    def _labels(self, t) -> list[str] | None:
        if self.module is not None or self.task_type == "regression":
            return None
        source = self.examples.get("train") or [e for ex in self.examples.values() for e in ex]
        labels = list(t.get("labels", ()) or ()) or D.label_list(source)
        head = getattr(self.source, "head", None)
        if head and head.get("labels") and list(head["labels"]) != labels:
            if not path_matcher(self.fresh_params or None)("classifier/kernel"):
                raise FinetuneError(
                    f"{t.train}: labels {labels} differ from the labels of the head in "
                    f"{self.source.location} ({head['labels']}); start that head fresh with "
                    "--config.fresh_params='^classifier/'"
                )
        return labels

    def _featurize(self, examples, t):
        if self.module is not None:
            return self.module.featurize(examples, self, t)
        if self.task_type == "tagging":
            return D.featurize_tagging(
                examples,
                self.tokenizer,
                self.max_seq_length,
                self.labels,
                bool(t.get("space_between_words", True)),
            )
        return D.featurize_classification(
            examples, self.tokenizer, self.max_seq_length, self.labels
        )

    def head(self, config) -> dict[str, Any]:
        t = config.task
        head = {
            "type": "sequence_classification",
            "num_labels": len(self.labels or [0]),
            "classifier_dropout": self.classifier_dropout,
            "task_type": self.task_type,
            "max_seq_length": self.max_seq_length,
        }
        if self.module is not None:
            return {**head, **self.module.head(self, t)}
        if self.labels is not None:
            head["labels"] = self.labels
        if self.task_type == "tagging":
            head.update(
                type="token_classification", scheme=t.scheme,
                space_between_words=bool(t.space_between_words),
            )  # fmt: skip
        else:
            head.update(text_a=t.text_a, text_b=t.get("text_b", "") or None, label=t.label)
        return head


# ---------------------------------------------------------------- tasks


class FinetuneTask:
    """What classification and tagging share: model, iterators, evaluation loop, saving."""

    progress_keys = ("loss", "accuracy", "learning_rate")
    final_splits = ("dev", "test")

    def __init__(self, config, data: FinetuneData, workdir: str | None = None):
        self.config, self.data = config, data
        self.model_config = data.model_config
        self.head = data.head(config)
        self.model = build_model(self.model_config, self.head)
        self.global_batch_size = int(config.batch_size)
        self.eval_batch_size = int(config.get("eval_batch_size", 0) or config.batch_size)
        self.seq_length = data.max_seq_length
        self.fresh_params = data.fresh_params
        self.init_source = data.source.location
        # In results.json (the trainer adds it): tables tell the random-init control apart.
        self.results_info = {"init": str(config.init), "random_init": data.random_init}
        self.workdir = workdir
        metric = M.best_metric_name(data.task_type, config.get("best_metric", "") or None)
        self.best_metric = (metric, "max" if M.higher_is_better(metric) else "min")

    # --- trainer interface
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

    def evaluate(self, run, step, split=None) -> dict[str, float]:
        """Scores the whole split (`dev` unless named); with a named split (the final
        evaluation) the predictions are written to `workdir/predictions/SPLIT.jsonl`."""
        name = split or "dev"
        if name not in self.data.features:
            return {}
        outputs = predict_all(run, self.data.features[name], self.eval_batch_size)
        rows, values = self.flag_collapse(name, step, *self.score(name, outputs))
        if split is not None and self.workdir and jax.process_index() == 0:
            self.write_predictions(paths.join(self.workdir, "predictions", name), rows)
            crash_point("predictions")
        return values

    def write_predictions(self, stem: str, rows) -> None:
        write_jsonl(stem + ".jsonl", rows)

    # The fresh head's parameters (for the multiplier named in the collapse warning; None: no
    # fresh head).
    head_pattern: str | None = FRESH_HEAD

    def collapse(self, rows, values) -> str | None:
        """What is degenerate about a split's predictions (`score`'s rows and metrics), or None
        (`albert_jax.tasks.metrics.prediction_collapse` and its siblings)."""
        return None

    def flag_collapse(self, split, step, rows, values):
        """(rows, values) with `collapsed` (1.0 / 0.0) among the metrics of a scored split; one
        warning line (console and train.log) when the predictions collapsed."""
        what = self.collapse(rows, values)
        if what and jax.process_index() == 0:
            log.warning(M.collapse_warning(split, step, what, self.config, self.head_pattern))
        if values:
            values = {**values, "collapsed": float(what is not None)}
        return rows, values


class ClassificationTask(FinetuneTask):
    """Single sentences or pairs; `regression` is the one-output head with squared error."""

    targets = ("label",)

    def normalizers(self, batch):
        return {"examples": jnp.asarray(batch["input_ids"].shape[0], jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits = self.apply(params, batch, rng)
        n = norms["examples"]
        if self.data.task_type == "regression":
            err = jnp.square(logits[:, 0] - batch["label"])
            return jnp.sum(err) / n, {"mse": jnp.sum(err) / n}
        logp = jax.nn.log_softmax(logits)
        nll = -jnp.take_along_axis(logp, batch["label"][:, None], axis=1)[:, 0]
        correct = jnp.argmax(logits, -1) == batch["label"]
        return jnp.sum(nll) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        return self.apply(params, batch, None)

    def score(self, split, logits):
        examples, feats = self.data.examples[split], self.data.features[split]
        rows = []
        if self.data.task_type == "regression":
            preds = logits[:, 0]
            values = M.regression_metrics(feats["label"], preds) if "label" in feats else {}
            for ex, p in zip(examples, preds, strict=True):
                rows.append(_row(ex, prediction=float(p)))
            return rows, values
        preds = logits.argmax(-1)
        probs = jax.nn.softmax(logits, -1)
        values = M.classification_metrics(feats["label"], preds) if "label" in feats else {}
        for ex, p, pr in zip(examples, preds, np.asarray(probs), strict=True):
            rows.append(
                _row(ex, prediction=self.data.labels[p], probabilities=np.round(pr, 6).tolist())
            )
        return rows, values

    def collapse(self, rows, values):
        preds = [r["prediction"] for r in rows]
        golds = [r["label"] for r in rows if "label" in r]
        if self.data.task_type == "regression":
            return M.regression_collapse(preds, golds if len(golds) == len(rows) else None)
        return M.prediction_collapse(preds, "examples", "predicted", golds)


class TaggingTask(FinetuneTask):
    """A tag per word, predicted at the word's first piece (BIO / BMES, entity-level F1)."""

    targets = ("labels",)

    def normalizers(self, batch):
        return {"tokens": jnp.maximum(jnp.sum(batch["labels"] >= 0), 1).astype(jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits = self.apply(params, batch, rng)
        labels = batch["labels"]
        mask = labels >= 0  # only first pieces: the masked mean over the global batch's words
        logp = jax.nn.log_softmax(logits)
        nll = -jnp.take_along_axis(logp, jnp.maximum(labels, 0)[..., None], axis=-1)[..., 0]
        n = norms["tokens"]
        correct = (jnp.argmax(logits, -1) == labels) & mask
        return jnp.sum(nll * mask) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        return jnp.argmax(self.apply(params, batch, None), -1).astype(jnp.int32)

    def score(self, split, preds):
        examples, feats = self.data.examples[split], self.data.features[split]
        labels = self.data.labels  # words cut by max_seq_length get the "nothing here" tag
        default = next((t for t in ("O", "S") if t in labels), labels[0])
        predicted = []
        for ex, p, w in zip(examples, preds, feats["word_ids"], strict=True):
            tags = [default] * len(ex.words)
            for pos in np.nonzero(w >= 0)[0]:
                tags[w[pos]] = self.data.labels[p[pos]]
            predicted.append(tags)
        values = {}
        if examples and examples[0].tags is not None:
            m = M.tagging_metrics([ex.tags for ex in examples], predicted, self.head["scheme"])
            per_type = m.pop("per_type")
            values = {**m, **{f"{k}_f1": v["f1"] for k, v in per_type.items() if k != "W"}}
        rows = [_row(ex, predicted=tags) for ex, tags in zip(examples, predicted, strict=True)]
        return rows, values

    def collapse(self, rows, values):
        tags = [t for r in rows for t in r["predicted"]]
        golds = [t for r in rows for t in r.get("tags", ())]
        return M.prediction_collapse(tags, f"words ({len(rows)} sentences)", "predicted", golds)


def make_task(config, data: FinetuneData, workdir=None) -> FinetuneTask:
    if data.module is not None:
        return data.module.Task(config, data, workdir)
    cls = TaggingTask if data.task_type == "tagging" else ClassificationTask
    return cls(config, data, workdir)


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


def _row(example, **fields) -> dict[str, Any]:
    row = {"where": example.where}
    if isinstance(example, D.TaggedExample):
        row["words"] = example.words
        if example.tags is not None:
            row["tags"] = example.tags
    else:
        row["text_a"] = example.text_a
        if example.text_b is not None:
            row["text_b"] = example.text_b
        if example.label is not None:
            row["label"] = example.label
    return {**row, **fields}


def write_jsonl(path: str, rows) -> None:
    """All rows, then one rename: a reader never sees half a file."""
    epath.Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = path + ".tmp"
    with paths.open_text(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    epath.Path(tmp).replace(path)


# ---------------------------------------------------------------- runs


def resolve_schedule(config, num_train: int):
    """A copy of `config` with steps from epochs: total_steps (unless set), warmup from
    `warmup_fraction`, evaluation and checkpoints once per epoch (unless set)."""
    config = config.copy_and_resolve_references()
    per_epoch = max(1, math.ceil(num_train / int(config.batch_size)))
    total = int(config.total_steps or 0) or math.ceil(float(config.num_epochs) * per_epoch)
    with config.unlocked():
        config.steps_per_epoch = per_epoch
        config.total_steps = total
        config.optim.total_steps = total
        config.optim.warmup_steps = int(round(float(config.warmup_fraction) * total))
        config.eval_every = int(config.eval_every or 0) or per_epoch
        config.checkpoint_every = int(config.checkpoint_every or 0) or config.eval_every
    return config


# `optim.learning_rate` / `optim.lr_multipliers` left at None are chosen by the model's hidden
# size. The reference's 2e-5 (1x) is right for base-and-larger checkpoints but leaves the
# project's small CPU ones (hidden 128-256) at the label prior; they train at 3e-4 with the fresh
# head at 10x (ner.py). Between the two sizes both are interpolated geometrically.
AUTO_LR = ((256, 3e-4, 10.0), (768, 2e-5, 1.0))  # (hidden size, learning rate, head multiplier)


def auto_learning_rate(hidden_size: int) -> tuple[float, float, str]:
    """(learning rate, head multiplier, why) for a model of this hidden size (AUTO_LR)."""
    (h0, lr0, m0), (h1, lr1, m1) = AUTO_LR
    if hidden_size <= h0:
        return lr0, m0, f"hidden {hidden_size} <= {h0}"
    if hidden_size >= h1:
        return lr1, m1, f"hidden {hidden_size} >= {h1}"
    t = math.log(hidden_size / h0) / math.log(h1 / h0)
    lr = float(f"{lr0 * (lr1 / lr0) ** t:.2g}")
    m = round(m0 * (m1 / m0) ** t, 1)
    return lr, m, f"hidden {hidden_size}: geometric between {lr0:g} at {h0} and {lr1:g} at {h1}"


def resolve_learning_rate(config, model_config):
    """(config, line): a copy of `config` whose auto (None) `optim.learning_rate` and
    `optim.lr_multipliers` are chosen by `auto_learning_rate`, and the line saying what was
    chosen and why (None, and `config` itself, when both are set explicitly)."""
    lr, mult = config.optim.get("learning_rate"), config.optim.get("lr_multipliers")
    if lr is not None and mult is not None:
        return config, None
    auto_lr, auto_mult, why = auto_learning_rate(model_config.hidden_size)
    config = config.copy_and_resolve_references()
    chosen, flags = [], []
    with config.unlocked():
        if lr is None:
            config.optim.learning_rate = auto_lr
            chosen.append(f"learning rate {auto_lr:g}")
            flags.append("--config.optim.learning_rate")
        if mult is None:
            config.optim.lr_multipliers = f"{FRESH_HEAD}={auto_mult:g}" if auto_mult != 1 else ""
            chosen.append(f"head lr x{auto_mult:g}")
            flags.append("--config.optim.lr_multipliers")
    return config, f"{', '.join(chosen)} (auto: {why}; pass {' / '.join(flags)} to override)"


def parse_seeds(config) -> list[int]:
    seeds = given = config.get("seeds", "")
    if isinstance(seeds, int):
        return [seeds]
    if isinstance(seeds, str):
        seeds = [s for s in seeds.replace(" ", "").split(",") if s]
    try:
        return [int(s) for s in seeds] or [int(config.seed)]
    except (TypeError, ValueError):
        raise FinetuneError(f"seeds={given!r}: expected integers (--config.seeds=0,1,2)") from None


SPLITS = ("train", "dev", "test")


def check_config(config) -> None:
    """What can be checked before anything is read, built or written: seeds, batch sizes, the
    schedule's settings and the optimizer (`optim.check_optim_config`; the learning rate may
    still be auto, the total steps come from the epochs later)."""
    parse_seeds(config)
    if config.task.type not in TASK_TYPES:
        raise FinetuneError(f"task.type must be one of {TASK_TYPES}, got {config.task.type!r}")
    lowest = {"batch_size": 1, "eval_batch_size": 0, "total_steps": 0}  # 0: batch_size / epochs
    for key, low in lowest.items():
        value = config.get(key, low)
        if not isinstance(value, int) or value < low:
            raise FinetuneError(f"{key} must be an integer >= {low}, got {value!r}")
    epochs, warmup = config.get("num_epochs", 1.0), config.get("warmup_fraction", 0.0)
    if not config.get("total_steps") and not (math.isfinite(epochs) and epochs > 0):
        raise FinetuneError(f"num_epochs must be > 0 (or total_steps set), got {epochs!r}")
    if not 0 <= warmup <= 1:
        raise FinetuneError(f"warmup_fraction must be between 0 and 1, got {warmup!r}")
    check_optim_config(config.optim, auto=True)


def dataset_to_build(config) -> str:
    """The `task.prepare` dataset to build before the run ('' if none): only when task.train is
    missing and every split names its own file (train.*, dev.*, test.*) in `task.prepare_dir`,
    the dataset's default place. A missing file anywhere else is the user's (a typo in their
    own directory must not have ours built over it): `check_files` names it."""
    t = config.task
    name, home = t.get("prepare", ""), t.get("prepare_dir", "")
    if not name or not home or not t.train or epath.Path(t.train).exists():
        return ""
    for split in SPLITS:
        path = t.get(split, "")
        stem, where = os.path.splitext(os.path.basename(path))[0], os.path.dirname(path)
        if path and (stem != split or os.path.abspath(where) != os.path.abspath(home)):
            return ""
    return name


def check_files(config) -> None:
    """Every data file named in task.train / dev / test exists (a file, or a directory of
    files: RACE's dev/)."""
    t = config.task
    for split in SPLITS:
        path = t.get(split, "")
        if path and not epath.Path(path).exists():
            name, home = t.get("prepare", ""), t.get("prepare_dir", "")
            hint = (
                f" (the {name} dataset is only built at its default place {home}; run "
                f"`python -m finetune.prepare {name} --out DIR` to build it elsewhere)"
                if name and home
                else ""
            )
            raise FinetuneError(f"task.{split} {path} does not exist{hint}")


def run(config, workdir: str) -> dict[str, Any]:
    """Fine-tune once per seed (`workdir/seed_S` when there are several); returns the summary
    (also in `workdir/summary.json`): per-seed results and mean ± std of dev and test metrics."""
    with lock.hold(paths.resolve(workdir), enabled=jax.process_index() == 0):
        return _run(config, workdir)


def _run(config, workdir: str) -> dict[str, Any]:
    seeds = parse_seeds(config)
    data = FinetuneData(config)
    _print_data(data)
    # The model's size is known now: an auto learning rate is chosen before the optimizer is built.
    config, chosen = resolve_learning_rate(config, data.model_config)
    if chosen and jax.process_index() == 0:
        print(chosen, flush=True)
    per_seed = {}
    for seed in seeds:
        # Epochs count training rows (QA: windows, several per question), as the iterator does.
        c = resolve_schedule(config, len(data.features["train"]["input_ids"]))
        with c.unlocked():
            c.seed = seed
        wd = paths.resolve(workdir if len(seeds) == 1 else paths.join(workdir, f"seed_{seed}"))
        task = make_task(c, data, wd)
        train(c, wd, task)
        per_seed[seed] = _seed_result(wd, c)
    summary = summarize(per_seed, data)
    if jax.process_index() == 0:
        text = json.dumps(summary, indent=2, sort_keys=True)
        paths.write_text(paths.join(workdir, "summary.json"), text)
        print(format_summary(summary), flush=True)
    return summary


def _print_data(data: FinetuneData) -> None:
    if jax.process_index() != 0:
        return
    for note in data.notes:
        print(f"note: {note}", flush=True)
    for split, s in data.stats.items():
        cut = s.get("truncated", 0)
        extra = f", {s['words_dropped']} words dropped" if s.get("words_dropped") else ""
        extra += f" ({s['windows']} windows)" if "windows" in s else ""
        if s.get("targets_truncated"):
            extra += f", {s['targets_truncated']} targets cut to task.max_target_length"
        if s.get("answers_not_found"):
            kept = "skipped" if s.get("skipped") else "scored on their texts"
            extra += f", {s['answers_not_found']} answers not at their offsets ({kept})"
        print(f"{split}: {s['examples']} examples, {cut} truncated{extra}", flush=True)


def _seed_result(workdir: str, config) -> dict[str, Any]:
    res = json.loads(epath.Path(workdir, "results.json").read_text())
    evals = {}
    with paths.open_text(paths.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row["split"] == "eval":
                evals[row["step"]] = row
    metric = res["metric"]
    first = evals.get(config.steps_per_epoch, {}).get(metric)
    last = evals[max(evals)] if evals else {}
    return {
        "metric": metric,
        "best_step": res["best_step"],
        "dev": res.get("dev", {}),
        "test": res.get("test", {}),
        "dev_first_epoch": first,
        "dev_last": last.get(metric),
    }


def summarize(per_seed: dict[int, dict], data: FinetuneData) -> dict[str, Any]:
    """mean and sample std (ddof=1; 0 for one seed) of every scalar metric over seeds."""
    out = {"seeds": sorted(per_seed), "per_seed": {str(k): v for k, v in per_seed.items()}}
    for split in ("dev", "test"):
        keys = sorted({k for r in per_seed.values() for k in r[split]})
        out[split] = {k: _mean_std([r[split].get(k) for r in per_seed.values()]) for k in keys}
    for key in ("dev_first_epoch", "dev_last"):
        out[key] = _mean_std([r[key] for r in per_seed.values()])
    out["metric"] = next(iter(per_seed.values()))["metric"]
    out["layout"] = data.model_config.layout
    out["init"] = "none" if data.random_init else data.source.location
    out["random_init"] = data.random_init
    return out


def _mean_std(values):
    v = np.asarray([x for x in values if x is not None], np.float64)
    if v.size == 0:
        return None
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def format_summary(summary) -> str:
    init = ", random init" if summary.get("random_init") else ""
    lines = [f"seeds {summary['seeds']} ({summary['layout']} layout{init}): mean ± std"]
    for split in ("dev", "test"):
        for k, ms in summary[split].items():
            if ms is not None:
                lines.append(f"  {split} {k}: {ms['mean']:.4f} ± {ms['std']:.4f}")
    fe = summary["dev_first_epoch"]
    if fe:
        lines.append(f"  dev {summary['metric']} after epoch 1: {fe['mean']:.4f} ± {fe['std']:.4f}")
    return "\n".join(lines)


# ---------------------------------------------------------------- prediction from a checkpoint


def predict_file(checkpoint_dir: str, input_path: str, output_path: str, batch_size: int = 64):
    """Predictions of a fine-tuned checkpoint (ours, with its head) for every example of
    `input_path` (the task's file format: JSONL / TSV / CSV, CoNLL / JSONL words for tagging,
    RACE records for multiple choice), written as JSONL. Returns the metrics when the input has
    labels, else {}."""
    import ml_collections

    head = checkpoint.load_head(checkpoint_dir)
    kinds = (
        "sequence_classification", "token_classification", "multiple_choice", "seq2seq",
        "relation_extraction",
    )  # fmt: skip
    if head and head.get("type") == "question_answering":
        raise FinetuneError(
            f"{checkpoint_dir} is a question-answering checkpoint: `finetune.predict` does not "
            "take those yet; its dev/test predictions are in the run's WORKDIR/predictions"
        )
    if not head or head.get("type") not in kinds:
        raise FinetuneError(
            f"{checkpoint_dir} has no fine-tuning head (head: {head}); predict needs a "
            "checkpoint written by `python -m finetune` (WORKDIR/best)"
        )
    task_config = {
        k: head.get(k, d)
        for k, d in (("text_a", "text"), ("text_b", ""), ("label", "label"), ("scheme", "BIO"))
    }
    task_config.update(
        type=head["task_type"],
        max_seq_length=head["max_seq_length"],
        labels=tuple(head.get("labels", ())),
        space_between_words=head.get("space_between_words", True),
        num_choices=head.get("num_choices", 0),  # the head's: shorter option lists are padded
        input=input_path,
    )
    if head["task_type"] in TASK_MODULES:  # the task's own settings ride in the head
        skip = {"type", "num_labels", "classifier_dropout", "task_type", "labels"}
        task_config.update({k: v for k, v in head.items() if k not in skip | task_config.keys()})
    config = ml_collections.ConfigDict(
        {
            "init": checkpoint_dir,
            "task": {**task_config, "text_b": task_config["text_b"] or ""},
            "model": {"classifier_dropout": head.get("classifier_dropout", 0.1)},
            "batch_size": batch_size,
            "seed": 0,
        }
    )
    data = FinetuneData(config, splits=("input",))
    task = make_task(config, data)
    params = data.source.params
    eval_fn = jax.jit(task.eval_step)

    def run(batch):
        return jax.device_get(eval_fn(params, batch))

    run.params = params
    if hasattr(task, "predict_split"):  # tasks that drive the model themselves (generation)
        rows, values = task.predict_split(run, "input")
    else:
        rows, values = task.score("input", predict_all(run, data.features["input"], batch_size))
    write_jsonl(paths.resolve(output_path), rows)
    return values

"""Sequence classification and regression: single sentences or pairs from TSV / CSV / JSONL
(`albert_jax.data.finetuning.records`), the pooled [CLS] output to one logit per class; `regression`
is the one-output head with squared error. Accuracy, macro-F1 and Matthews (classification), Pearson
and Spearman (regression)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from albert_jax.data.finetuning import benchmarks
from albert_jax.data.finetuning import records as D
from albert_jax.model.losses import cross_entropy
from albert_jax.scoring import metrics as M
from albert_jax.tasks.finetune_config import ClassificationSettings, TaskSettings
from albert_jax.tasks.finetuning import FinetuneError, FinetuneReader, FinetuneTask
from albert_jax.train.optim import path_matcher, regex_list


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
        nll = cross_entropy(logits, batch["label"])
        correct = jnp.argmax(logits, -1) == batch["label"]
        return jnp.sum(nll) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        return self.apply(params, batch, None)

    def rows_and_metrics(self, split, logits):
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
        positive = self.data.task_settings.positive
        positive = self.data.labels.index(positive) if positive else None
        values = {}
        if "label" in feats:
            values = M.classification_metrics(feats["label"], preds, positive)
        for ex, p, pr, lg in zip(examples, preds, np.asarray(probs), logits, strict=True):
            rows.append(
                _row(ex, prediction=self.data.labels[p], probabilities=np.round(pr, 6).tolist(),
                     logits=np.round(np.asarray(lg, np.float64), 6).tolist())
            )  # fmt: skip
        return rows, values

    def collapse(self, rows, values):
        preds = [r["prediction"] for r in rows]
        golds = [r["label"] for r in rows if "label" in r]
        if self.data.task_type == "regression":
            return M.regression_collapse(preds, golds if len(golds) == len(rows) else None)
        return M.prediction_collapse(preds, "examples", "predicted", golds)


class ClassificationReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): TSV /
    CSV / JSONL columns named by the settings, or the same columns of a parquet / arrow file or
    an `hf:` / `tfds:` dataset (`albert_jax.data.tables`; class ids read as their names)."""

    settings: ClassificationSettings

    def read(self, path):
        s = self.settings
        bench, counts = benchmarks.get(s.benchmark) if s.benchmark else None, {}
        if bench and bench.read:  # files the columns alone cannot read (CLUE's CSL, WSC)
            examples = bench.read(path, s)
        else:
            examples = D.read_examples(
                path, text_a=s.text_a, text_b=s.text_b or None, label=s.label, task_type=s.type,
                id=s.id or None, columns=regex_list(s.columns),
                skip_labels=regex_list(s.skip_labels), bad_rows=s.bad_rows, counts=counts,
                data_dir=s.data_dir,
            )  # fmt: skip
        benchmarks.check_ids(s.benchmark, path, examples, s.id)
        return examples, counts

    def check_targets(self, examples) -> None:
        if ex := first_without(examples, "label"):
            raise D.DataError(
                f"task.train {self.settings.train}: {ex.where}: no {self.settings.label!r} "
                "column; name the label column with --config.task.label=COLUMN"
            )

    def labels(self, data) -> list[str] | None:
        return None if self.settings.type == "regression" else class_labels(data, self.settings)

    def featurize(self, examples, data):
        return D.featurize_classification(
            examples, data.tokenizer, data.max_seq_length, data.labels
        )

    def head_fields(self, data) -> dict:
        s = self.settings
        fields = {"labels": data.labels} if data.labels is not None else {}
        return {
            "type": "sequence_classification",
            "num_labels": len(data.labels or [0]),
            **fields,
            "text_a": s.text_a,
            "text_b": s.text_b or None,
            "label": s.label,
            # how `finetune.predict` reads a file of the task's and writes its submission
            **{k: v for k, v in benchmark_fields(s).items() if v},
        }


def benchmark_fields(s: ClassificationSettings) -> dict:
    """The settings a benchmark task's head keeps, so that `finetune.predict` reads its test
    file as the run did and writes the submission file."""
    return {
        "benchmark": s.benchmark,
        "id": s.id,
        "columns": list(regex_list(s.columns)),
        "positive": s.positive,
        "bad_rows": "" if s.bad_rows == "error" else s.bad_rows,
    }


def _row(example: D.Example, **fields) -> dict[str, Any]:
    row = {"where": example.where, "text_a": example.text_a}
    if example.text_b is not None:
        row["text_b"] = example.text_b
    if example.label is not None:
        row["label"] = example.label
    if example.id is not None:
        row["id"] = example.id
    return {**row, **fields}


def class_labels(data, t: TaskSettings) -> list[str]:
    """`task.labels`, else the sorted labels of the training file (of all splits without one);
    a starting head with other labels must start fresh (shared with tagging: its tag set)."""
    source = data.examples.get("train") or [e for ex in data.examples.values() for e in ex]
    labels = list(regex_list(t.labels)) or D.label_list(source)
    if len(labels) < 2:  # a 1-output head: loss 0 and accuracy 1 from the first step
        what = "task.labels" if t.labels else f"task.train {t.train}"
        kind = "tag" if t.type == "tagging" else "label"
        raise FinetuneError(
            f"{what}: {len(labels)} {kind}(s) {labels}: {t.type} needs at least 2 {kind}s to "
            "tell apart"
        )
    positive = getattr(t, "positive", "")
    if positive and positive not in labels:
        raise FinetuneError(f"task.positive={positive!r} is not one of the labels {labels}")
    head = getattr(data.source, "head", None)
    if head and head.get("labels") and list(head["labels"]) != labels:
        if not path_matcher(data.fresh_params or None)("classifier/kernel"):
            raise FinetuneError(
                f"{t.train}: labels {labels} differ from the labels of the head in "
                f"{data.source.location} ({head['labels']}); start that head fresh with "
                "--config.fresh_params='^classifier/'"
            )
    return labels


def first_without(examples, target: str):
    """The first example without its `target` (a file without that column reads as inputs to
    predict, and would fail inside the data pipeline), or None."""
    return next((ex for ex in examples if getattr(ex, target) is None), None)


Task = ClassificationTask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = ClassificationReader  # its data side

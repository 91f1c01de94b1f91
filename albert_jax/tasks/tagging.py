"""Token tagging: CoNLL `word ... tag` lines or JSONL `{words, tags}`
(`albert_jax.data.finetuning.records`), a tag per word predicted at the word's first piece (BIO /
BMES), entity-level precision / recall / F1 as seqeval's strict mode computes them."""

from __future__ import annotations

import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from albert_jax.data import tables
from albert_jax.data.finetuning import records as D
from albert_jax.model.losses import cross_entropy
from albert_jax.scoring import metrics as M
from albert_jax.tasks import classification
from albert_jax.tasks.finetune_config import TaggingSettings
from albert_jax.tasks.finetuning import FinetuneReader, FinetuneTask


class TaggingTask(FinetuneTask):
    """A tag per word, predicted at the word's first piece (BIO / BMES, entity-level F1)."""

    targets = ("labels",)

    def normalizers(self, batch):
        return {"tokens": jnp.maximum(jnp.sum(batch["labels"] >= 0), 1).astype(jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits = self.apply(params, batch, rng)
        labels = batch["labels"]
        mask = labels >= 0  # only first pieces: the masked mean over the global batch's words
        n = norms["tokens"]
        correct = (jnp.argmax(logits, -1) == labels) & mask
        return jnp.sum(cross_entropy(logits, labels, mask)) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        return jnp.argmax(self.apply(params, batch, None), -1).astype(jnp.int32)

    def rows_and_metrics(self, split, preds):
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


class TaggingReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): CoNLL
    or JSONL words and tags, or the `words` / `tags` columns of a parquet / arrow file or an
    `hf:` / `tfds:` dataset (`albert_jax.data.tables`), checked against the settings' scheme."""

    settings: TaggingSettings

    def read(self, path):
        s = self.settings
        if tables.is_table(path):  # parquet / arrow, hf:..., tfds:...: the settings' columns
            examples = D.read_tagged_table(path, s.words, s.tags, s.data_dir)
        else:
            examples = D.read_conll(path)
        check_scheme(examples, os.fspath(path), s.scheme)
        return examples, {}

    def check_targets(self, examples) -> None:
        if ex := classification.first_without(examples, "tags"):
            if tables.is_table(self.settings.train):
                raise D.DataError(
                    f"task.train {self.settings.train}: no column {self.settings.tags!r} of "
                    "tags; name it with --config.task.tags=COLUMN"
                )
            raise D.DataError(
                f"task.train {self.settings.train}: {ex.where}: no tag column (training needs "
                "lines of `word ... tag`, tab- or space-separated)"
            )

    def labels(self, data) -> list[str] | None:
        # the tag set is chosen and checked as classes are
        return classification.class_labels(data, self.settings)

    def featurize(self, examples, data):
        return D.featurize_tagging(
            examples,
            data.tokenizer,
            data.max_seq_length,
            data.labels,
            bool(self.settings.space_between_words),
        )

    def head_fields(self, data) -> dict:
        s = self.settings
        return {
            "type": "token_classification",
            "num_labels": len(data.labels or [0]),
            "labels": data.labels,
            "scheme": s.scheme,
            "space_between_words": bool(s.space_between_words),
            # a table's columns, where not the defaults (`finetune.predict` reads them back)
            **{k: getattr(s, k) for k in ("words", "tags") if getattr(s, k) != k},
        }


def _row(example: D.TaggedExample, **fields) -> dict[str, Any]:
    row = {"where": example.where, "words": example.words}
    if example.tags is not None:
        row["tags"] = example.tags
    return {**row, **fields}


Task = TaggingTask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = TaggingReader  # its data side


def check_scheme(examples, path: str, scheme: str) -> None:
    """Every tag is one of `scheme`'s (a stray one would only fail the first evaluation); the
    error names the tag's line (a CoNLL sentence has one word a line from its first)."""
    conll = os.path.splitext(path)[1].lower() not in (".jsonl", ".json")
    for ex in examples:
        for w, tag in enumerate(ex.tags or ()):
            if why := M.scheme_error(tag, scheme):
                fix = "is --config.task.scheme right?"
                if tables.is_table(path):  # REF:row N, the tag's word counted from 0
                    raise D.DataError(f"{ex.where}, word {w}: {why}; {fix}")
                line = int(ex.where.rsplit(":", 1)[1]) + (w if conll else 0)
                raise D.DataError(f"{path}:{line}: {why}; {fix}")

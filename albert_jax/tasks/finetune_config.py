"""Fine-tuning's own settings: typed sections, their defaults in one place.

`configs/finetune/common.py` builds every fine-tuning config from `TrainerConfig.section()`,
`FinetuneConfig.section()` and `task_section(type)` (plus the optimizer and model-override
sections), so each leaf below exists and parses on the command line; the library reads them back
with `from_config` (`config.task` into its kind's `TaskSettings` subclass), never with a default
of its own. No pretraining leaf is part of a fine-tuning config.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from albert_jax import paths
from albert_jax.data import tables
from albert_jax.errors import InputError
from albert_jax.sections import Section
from albert_jax.train.config import EvalConfig


class FinetuneError(InputError):
    """A fine-tuning setup that cannot work (the message says what to change)."""


# `config.evals` of every fine-tuning config (`albert_jax.train.config.EvalConfig`): dev at every
# evaluation of the plan (once per epoch unless `eval_every` is set) and, with the best model's
# parameters, dev and test at the end (their predictions in WORKDIR/predictions).
FINETUNE_EVALS = {
    "dev": EvalConfig(split="dev", final=True),
    "test": EvalConfig(split="test", every=-1, final=True),
}


@dataclasses.dataclass(frozen=True)
class LrSearch(Section):
    """The learning-rate search (`albert_jax.jobs.lr_search`), on when the rate is left to
    auto (`optim.learning_rate` None)."""

    enabled: bool = False
    grid: Any = ""  # '' = by model size, else e.g. '1e-5,3e-5,1e-4' (or a sequence)
    budget: float = 0.5  # all trials together, in units of the full run's steps (0.5: 1.5x)
    # when every trial collapsed, run them again at twice the length, at most this many times
    # (chosen on hsk: half an epoch left every rate at the prior, one epoch did not)
    retries: int = 2

    def __post_init__(self):
        if not isinstance(self.budget, int | float) or not 0 < self.budget <= 10:
            raise FinetuneError(f"lr_search.budget must be in (0, 10], got {self.budget!r}")
        r = self.retries
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise FinetuneError(f"lr_search.retries must be an integer >= 0, got {r!r}")


@dataclasses.dataclass(frozen=True)
class ModelOverrides(Section):
    """`config.model` of a fine-tuning run: what it changes of the starting checkpoint's model
    (None keeps the checkpoint's value) and the head's dropout. Encoder and classifier dropout
    are separate settings: v2 models fine-tune with encoder dropout 0, classifier dropout 0.1.
    Any other `AlbertConfig` field a config adds to the section is applied as given."""

    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    classifier_dropout: float = 0.1

    @staticmethod
    def encoder(model) -> dict[str, Any]:
        """The `AlbertConfig` fields a `config.model` section sets (its None leaves keep the
        checkpoint's values)."""
        return {k: v for k, v in model.items() if v is not None and k != "classifier_dropout"}


@dataclasses.dataclass(frozen=True)
class FinetuneConfig(Section):
    # Ours, a transformers dir, a TF1 checkpoint or a pretraining workdir; 'none': random weights
    # (the control: needs `tokenizer` and `model_from`, see configs/finetune/common.py)
    init: str = "runs/cpu_small/model"
    model_from: str = ""  # init='none': the shape (checkpoint / workdir / config.json / preset)
    unshare: str = ""  # '' keeps the checkpoint's layout; all | attention | ffn: per-layer copies
    fresh_params: Any = ""  # path regexes that start fresh even if the checkpoint has them
    # '' = the checkpoint's tokenizer; else a tokenizer directory (spiece.model / vocab.txt), a
    # checkpoint or a pretraining workdir whose tokenizer to use
    tokenizer: str = ""
    seeds: Any = ""  # '0,1,2': one run per seed in WORKDIR/seed_S, then mean ± std
    batch_size: int = 32
    eval_batch_size: int = 0  # 0: batch_size
    num_epochs: float = 3.0
    min_steps: int = 0  # > 0: at least this many steps (more epochs on a small training set)
    warmup_fraction: float = 0.1
    max_train_examples: int = 0  # > 0: the first N training examples only
    best_metric: str = ""  # '' = accuracy / pearson / f1 by task type
    lr_search: LrSearch = LrSearch()

    def __post_init__(self):
        warmup = self.warmup_fraction
        if not 0 <= warmup <= 1:
            raise FinetuneError(f"warmup_fraction must be between 0 and 1, got {warmup!r}")

    def check_epochs(self, total_steps: int) -> None:
        """Without `total_steps` the steps come from `num_epochs`, which must then be > 0."""
        epochs = self.num_epochs
        if not total_steps and not (math.isfinite(epochs) and epochs > 0):
            raise FinetuneError(f"num_epochs must be > 0 (or total_steps set), got {epochs!r}")


# ---------------------------------------------------------------- the task section


@dataclasses.dataclass(frozen=True)
class TaskSettings(Section):
    """`config.task`: the leaves every task kind has. Each kind's subclass below adds its own
    (`TASK_SETTINGS` by type); `FinetuneData` reads `config.task` once into it and builds the
    kind's `Reader` on it. A leaf of the section that the kind does not declare is not read
    (every config has the classification and tagging leaves: `task_section`)."""

    type: str = "classification"  # classification | regression | tagging | qa | ... (TASK_TYPES)
    train: str = ""
    dev: str = ""
    test: str = ""
    prepare: str = ""  # a finetune.prepare dataset built when `train` is missing ...
    prepare_dir: str = ""  # ... and train / dev / test are its files here (use_prepared)
    # more splits, scored at the end with the best parameters when `config.evals` names them:
    # 'NAME=FILE,...' (GLUE's MNLI: 'dev_mismatched=MNLI/dev_mismatched.tsv,...')
    extra_splits: str = ""
    # '': the split files as named; else the folder their relative names are in (and where
    # `tfds:NAME:SPLIT` datasets are: `albert_jax.data.tables`; '': TFDS's default)
    data_dir: str = ""
    # a published benchmark's files and submission format (`albert_jax.data.finetuning.benchmarks`:
    # 'glue/cola', 'clue/afqmc', ...); '': the kind's own formats, no submission file
    benchmark: str = ""
    max_seq_length: int = 128
    labels: Any = ()  # () = the sorted labels of the training file
    # `finetune.predict`'s file, its one split (`run.predict_file`): no leaf of a run's config
    input: str = ""

    def __post_init__(self):
        for split in self.extras:
            if split in ("train", "dev", "test", "input") or not split.isidentifier():
                raise FinetuneError(
                    f"task.extra_splits={self.extra_splits!r}: {split!r} is not a new split "
                    "name (NAME=FILE,...; NAME a word other than train, dev and test)"
                )

    @classmethod
    def section(cls):
        c = super().section()
        del c["input"]  # (the split `run.predict_file` reads)
        return c

    @property
    def extras(self) -> dict[str, str]:
        """`extra_splits` as {name: file}."""
        out = {}
        for item in filter(None, (x.strip() for x in str(self.extra_splits).split(","))):
            name, eq, file = item.partition("=")
            if not eq or not name.strip() or not file.strip():
                raise FinetuneError(
                    f"task.extra_splits={self.extra_splits!r}: {item!r} is not NAME=FILE"
                )
            out[name.strip()] = file.strip()
        return out

    @property
    def splits(self) -> tuple[str, ...]:
        """The split names a run reads: train, dev, test and the extra ones."""
        return ("train", "dev", "test", *self.extras)

    def path(self, split: str) -> str:
        """The file of a split ('' when none is named), under `data_dir` when it is relative; an
        `hf:` / `tfds:` dataset reference (`albert_jax.data.tables`) as given."""
        file = self.extras[split] if split in self.extras else getattr(self, split)
        if tables.is_reference(file):
            return file
        if file and self.data_dir and not (os.path.isabs(file) or paths.is_uri(file)):
            return paths.join(self.data_dir, file)
        return file


@dataclasses.dataclass(frozen=True)
class ClassificationSettings(TaskSettings):
    """classification / regression files (TSV/CSV with a header, or JSONL): their columns."""

    text_a: str = "text"
    text_b: str = ""  # '' = single sentences
    label: str = "label"
    id: str = ""  # the column of each example's id in a submission file ('': none)
    # a table whose first row does not name `text_a` has no header: its column names, in order
    # ('a,b,c' or a sequence; GLUE's CoLA: 'source,label,original_label,sentence')
    columns: Any = ()
    skip_labels: Any = ()  # rows with these labels are left out (CLUE's '-': no agreement)
    # 'skip': table rows with another number of fields than the header are left out and
    # counted, instead of an error (GLUE's QQP train file has some)
    bad_rows: str = "error"
    positive: str = ""  # a binary task's positive class: its F1 is reported as `f1` (MRPC, QQP)


@dataclasses.dataclass(frozen=True)
class TaggingSettings(TaskSettings):
    """tagging (CoNLL: word<TAB>tag, blank line between sentences)."""

    scheme: str = "BIO"  # BIO | BMES
    space_between_words: bool = True  # False for Chinese (no spaces between words)
    # a table's columns (parquet / arrow, hf:..., tfds:...: `albert_jax.data.tables`): a list
    # of words and a list of tags per row (conll2003 in `datasets`: tokens, ner_tags)
    words: str = "words"
    tags: str = "tags"


@dataclasses.dataclass(frozen=True)
class QASettings(TaskSettings):
    """Extractive QA (SQuAD files); the defaults are configs/finetune/cloze.py's."""

    doc_stride: int = 48  # pieces between window starts
    max_query_length: int = 64  # question pieces kept
    max_answer_length: int = 16  # pieces of a predicted span
    n_best: int = 20
    char_level: bool = True  # F1 over characters for Chinese (CMRC-style), words otherwise


@dataclasses.dataclass(frozen=True)
class ChoiceSettings(TaskSettings):
    """Multiple choice (RACE records)."""

    num_choices: int = 0  # 0: every question has as many options as the first


@dataclasses.dataclass(frozen=True)
class RelationSettings(TaskSettings):
    """Relation extraction (DuIE-style triples); the last three decode at evaluation."""

    predicates: Any = ()  # () = the sorted predicates of the training file
    max_subjects: int = 8  # subject candidates decoded per text
    max_span_length: int = 32  # pieces of a decoded subject or object
    threshold: float = 0.5  # start / end probability that opens / closes a span


@dataclasses.dataclass(frozen=True)
class Seq2SeqSettings(TaskSettings):
    """UniLM seq2seq (JSONL of source / target texts)."""

    source_key: str = "source"
    target_key: str = "target"
    max_target_length: int = 32  # target pieces (longer ones are cut and counted)
    beam_size: int = 1  # 1: greedy
    length_penalty: float = 0.0  # scores divided by length ** this
    char_level: bool = True  # character F1 / BLEU / ROUGE-L for Chinese
    entity_scores: bool = False  # also entity-level P/R/F1 of the parsed target lists


# A kind's settings by task type (finetuning.TASK_MODULES names the same types).
TASK_SETTINGS: dict[str, type[TaskSettings]] = {
    "classification": ClassificationSettings,
    "regression": ClassificationSettings,
    "tagging": TaggingSettings,
    "qa": QASettings,
    "multiple_choice": ChoiceSettings,
    "relation": RelationSettings,
    "seq2seq": Seq2SeqSettings,
}


def task_section(task_type: str):
    """`config.task` as every fine-tuning config starts it (configs/finetune/common.py): the
    kind's leaves with their defaults, and the classification and tagging leaves whatever the
    kind (tsv.py takes either type from the command line)."""
    c = ClassificationSettings.section()
    c.update(TaggingSettings.section())
    c.update(TASK_SETTINGS.get(task_type, TaskSettings).section())  # (a wrong type: check_config)
    c.type = task_type
    return c

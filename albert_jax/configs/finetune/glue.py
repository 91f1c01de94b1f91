"""GLUE, read from the official distribution's files as they are, scored as the benchmark
scores it, with the GLUE server's submission files. TASK: cola, sst2, mrpc, stsb, qqp, mnli,
qnli, rte, wnli.

  python -m finetune --config configs/finetune/glue.py:rte --workdir runs/glue/rte \
      --config.task.data_dir=GLUE_DIR --config.init=runs/albert-base-v2
  python -m finetune.predict --checkpoint runs/glue/rte/best \
      --input GLUE_DIR/RTE/test.tsv --output runs/glue/rte/test.jsonl   # + RTE.tsv beside it

`task.data_dir` is the folder GLUE's download makes (CoLA/, SST-2/, MRPC/, STS-B/, QQP/, MNLI/,
QNLI/, RTE/, WNLI/); `init` a checkpoint to fine-tune (required: e.g. a released model converted
with `python -m albert_jax.convert`, whose tokenizer comes with it). The files are read as GLUE
ships them: CoLA's train and dev without a header row, MNLI's matched and mismatched dev and
test sets, every test file without labels, QQP's rows with the wrong number of fields (its
train file has some) skipped and counted.

Metrics as GLUE defines them (every run also reports accuracy, macro-F1 and Matthews): CoLA
Matthews correlation (`mcc`); STS-B Pearson and Spearman; MRPC and QQP F1 of the paraphrase
class (`f1`) and accuracy; the others accuracy. The best checkpoint on dev is chosen by the
original's metric (Matthews for CoLA, Pearson for STS-B, accuracy otherwise). MNLI's dev is the
matched set; the mismatched one is scored at the end as `dev_mismatched`.

Hyperparameters: the ALBERT paper's Table 14 (learning rate, batch, ALBERT dropout, classifier
dropout 0.1, train steps, warmup steps, max length 512), the optimizer as the original's
(AdamW, common.py). WNLI, which the table leaves out, searches its learning rate on dev
(tsv.py). The paper starts RTE, MRPC and STS-B from the MNLI model
(`--config.init=runs/glue/mnli/best --config.fresh_params='^classifier/'`) and reports the median
of five seeds (`--config.seeds=0,1,2,3,4`). On a CPU, `--config.task.max_seq_length=128` is ~5x
faster a step.

Outputs beyond every run's (docs/finetuning.md): WORKDIR/submission/ holds the GLUE server's
file of each test set (`CoLA.tsv`, `MNLI-m.tsv` and `MNLI-mm.tsv`, ...: `index<TAB>prediction`,
one row per test example), written at the end with the best parameters.
"""

import dataclasses

from albert_jax.configs.finetune.common import get_common, use_new_task_defaults
from albert_jax.train.config import EvalConfig

# task -> (folder, type, text_a, text_b, label, id, labels, positive class)
TASKS = {
    "cola": ("CoLA", "classification", "sentence", "", "label", "index", "0,1", ""),
    "sst2": ("SST-2", "classification", "sentence", "", "label", "index", "0,1", ""),
    "mrpc": ("MRPC", "classification", "#1 String", "#2 String", "Quality", "index", "0,1", "1"),
    "stsb": ("STS-B", "regression", "sentence1", "sentence2", "score", "index", "", ""),
    "qqp": ("QQP", "classification", "question1", "question2", "is_duplicate", "id", "0,1", "1"),
    "mnli": (
        "MNLI",
        "classification",
        "sentence1",
        "sentence2",
        "gold_label",
        "index",
        "contradiction,entailment,neutral",
        "",
    ),  # fmt: skip
    "qnli": (
        "QNLI",
        "classification",
        "question",
        "sentence",
        "label",
        "index",
        "entailment,not_entailment",
        "",
    ),  # fmt: skip
    "rte": (
        "RTE",
        "classification",
        "sentence1",
        "sentence2",
        "label",
        "index",
        "entailment,not_entailment",
        "",
    ),  # fmt: skip
    "wnli": ("WNLI", "classification", "sentence1", "sentence2", "label", "index", "0,1", ""),
}
# Table 14: learning rate, batch, ALBERT dropout, train steps, warmup steps (WNLI: not given)
TABLE_14 = {
    "cola": (1e-5, 16, 0.0, 5336, 320),
    "stsb": (2e-5, 16, 0.0, 3598, 214),
    "sst2": (1e-5, 32, 0.0, 20935, 1256),
    "mnli": (3e-5, 128, 0.0, 10000, 1000),
    "qnli": (1e-5, 32, 0.0, 33112, 1986),
    "qqp": (5e-5, 128, 0.1, 14000, 1000),
    "rte": (3e-5, 32, 0.1, 800, 200),
    "mrpc": (2e-5, 32, 0.0, 800, 200),
}
BEST_METRIC = {"cola": "mcc"}  # the original's choice of checkpoint; else accuracy / pearson
COLA_COLUMNS = "source,label,original_label,sentence"  # its train/dev files have no header


def get_config(arg: str | None = None):
    if arg not in TASKS:
        raise ValueError(f"glue.py:TASK with TASK one of {sorted(TASKS)}, got {arg!r}")
    folder, kind, text_a, text_b, label, key, labels, positive = TASKS[arg]
    c = get_common(kind)
    c.init = ""  # required: the checkpoint to fine-tune
    t = c.task
    t.update(benchmark=f"glue/{arg}", text_a=text_a, text_b=text_b, label=label, id=key)
    t.update(labels=tuple(labels.split(",")) if labels else (), positive=positive)
    t.max_seq_length = 512
    t.update(train=f"{folder}/train.tsv", dev=f"{folder}/dev.tsv", test=f"{folder}/test.tsv")
    if arg == "qqp":  # its train file has rows with too few fields (a question with a tab)
        t.bad_rows = "skip"  # left out and counted: the run prints how many
    if arg == "cola":
        t.columns = tuple(COLA_COLUMNS.split(","))
    if arg == "mnli":
        t.update(dev=f"{folder}/dev_matched.tsv", test=f"{folder}/test_matched.tsv")
        t.extra_splits = (
            f"dev_mismatched={folder}/dev_mismatched.tsv,"
            f"test_mismatched={folder}/test_mismatched.tsv"
        )
        for split in ("dev_mismatched", "test_mismatched"):
            c.evals[split] = dataclasses.asdict(EvalConfig(split=split, every=-1, final=True))
    c.best_metric = BEST_METRIC.get(arg, "")
    if arg in TABLE_14:
        lr, batch, dropout, steps, warmup = TABLE_14[arg]
        c.optim.learning_rate, c.batch_size, c.total_steps = lr, batch, steps
        c.warmup_fraction = warmup / steps
        c.model.hidden_dropout = c.model.attention_dropout = dropout
    else:  # WNLI: searched on dev
        use_new_task_defaults(c)
    c.model.classifier_dropout = 0.1
    return c

"""CLUE, read from the files of CLUE's download as they are, scored as CLUE scores it, with
CLUE's submission files. TASK: afqmc, tnews, iflytek, cmnli, ocnli, csl, wsc (CLUEWSC2020),
cmrc2018.

  python -m finetune --config configs/finetune/clue.py:afqmc --workdir runs/clue/afqmc \
      --config.task.data_dir=CLUE_DIR --config.init=runs/albert_base_zh
  python -m finetune.predict --checkpoint runs/clue/tnews/best \
      --input CLUE_DIR/tnews_public/test1.0.json --output runs/clue/tnews/test10.jsonl

`task.data_dir` is the folder holding CLUE's task folders, each zip of CLUE's download
(storage.googleapis.com/cluebenchmark/tasks/NAME_public.zip) unpacked into a folder of its name:
afqmc_public/, tnews_public/, iflytek_public/, cmnli_public/, ocnli_public/, csl_public/,
cluewsc2020_public/, cmrc2018_public/, each with train.json, dev.json and test.json (the
classification tasks' files JSON lines, CMRC 2018's SQuAD-format JSON). Most zips hold the files
themselves (`unzip afqmc_public.zip -d afqmc_public`); cmnli_public.zip holds its folder
(`unzip cmnli_public.zip`). Which zips hold a folder is from third-party loaders, not checked
against the zips: if yours differ, name the files (`--config.task.train=.../train.json`, dev,
test). `init` is a checkpoint to fine-tune (required: a Chinese ALBERT, e.g. albert_zh converted
with `python -m albert_jax.convert`, whose tokenizer comes with it).

Columns and labels as CLUE's baseline processors read them: AFQMC sentence1 / sentence2 (0, 1);
TNEWS sentence (its 15 codes 100-116 without 105 and 111; the `keywords` field is not read, as
in the baseline); IFLYTEK sentence (0-118); CMNLI and OCNLI sentence1 / sentence2
(contradiction, entailment, neutral; rows labelled '-', where the annotators did not agree, are
left out: `task.skip_labels`); CSL the keyword list joined by spaces / the abstract (0, 1;
`benchmarks.read_csl`); CLUEWSC2020 the text with its noun between underscores and its pronoun
in brackets (true, false; `benchmarks.read_wsc`). Every test row's `id` field is its id in the
submission (its row number where it has none). The metric is accuracy (CLUE's), for CMRC 2018
the SQuAD EM / F1 over characters (`task.char_level`), the best checkpoint chosen by it.

Hyperparameters: CLUE's ALBERT baselines: its run_classifier_TASK.sh for albert_zh (learning
rate 3e-5, batch 16, 2 epochs, length 128: AFQMC, TNEWS, CMNLI, WSC), its leaderboard's
ALBERT-xlarge rows (IFLYTEK 2e-5, batch 32, 3 epochs; CSL 5e-6, batch 16, 2 epochs), its
ALBERT-base CMRC 2018 row (3e-5, batch 32, 2 epochs, length 512, warmup 0.1; windows as SQuAD's
reference: stride 128, question 64, answer 30 pieces, n-best 20); OCNLI, which no ALBERT baseline
covers, searches its learning rate on dev (tsv.py). Warmup 0.1 of the steps (the baselines'), the
checkpoint's own dropout, classifier dropout 0.1.

Outputs beyond every run's (docs/finetuning.md): WORKDIR/submission/ holds CLUE's file for the
test set, written at the end with the best parameters, under CLUE 1.1's names: afqmc_predict.json,
tnews11_predict.json, iflytek_predict.json, cmnli_predict.json, ocnli_50k_predict.json,
csl_predict.json, cluewsc11_predict.json (`{"id": ..., "label": ...}` per test row, in order) and
cmrc2018_predict.json (one object {question id: answer text}; CMRC's test set has no answers:
it is predicted, not scored). `finetune.predict` on TNEWS' or CLUEWSC2020's test1.0.json writes
their 1.0 files (tnews10_predict.json, cluewsc10_predict.json).
"""

from albert_jax.configs.finetune.common import get_common, use_new_task_defaults

# task -> (folder, text_a, text_b, labels)
TASKS = {
    "afqmc": ("afqmc_public", "sentence1", "sentence2", "0,1"),
    "tnews": (
        "tnews_public",
        "sentence",
        "",
        ",".join(str(100 + i) for i in range(17) if i not in (5, 11)),
    ),  # fmt: skip
    "iflytek": ("iflytek_public", "sentence", "", ",".join(str(i) for i in range(119))),
    "cmnli": ("cmnli_public", "sentence1", "sentence2", "contradiction,entailment,neutral"),
    "ocnli": ("ocnli_public", "sentence1", "sentence2", "contradiction,entailment,neutral"),
    # the texts come from the benchmark's reader (benchmarks.read_csl / read_wsc)
    "csl": ("csl_public", "keyword", "abst", "0,1"),
    "wsc": ("cluewsc2020_public", "text", "", "true,false"),
    "cmrc2018": ("cmrc2018_public", "", "", ""),
}
# CLUE's ALBERT baselines: learning rate, batch, epochs, max length (OCNLI: searched)
BASELINES = {
    "afqmc": (3e-5, 16, 2.0, 128),
    "tnews": (3e-5, 16, 2.0, 128),
    "iflytek": (2e-5, 32, 3.0, 128),
    "cmnli": (3e-5, 16, 2.0, 128),
    "csl": (5e-6, 16, 2.0, 128),
    "wsc": (3e-5, 16, 2.0, 128),
    "cmrc2018": (3e-5, 32, 2.0, 512),
}
SKIP_LABELS = ("-",)  # CMNLI / OCNLI rows without an agreed label


def get_config(arg: str | None = None):
    if arg not in TASKS:
        raise ValueError(f"clue.py:TASK with TASK one of {sorted(TASKS)}, got {arg!r}")
    folder, text_a, text_b, labels = TASKS[arg]
    qa = arg == "cmrc2018"
    c = get_common("qa" if qa else "classification")
    c.init = ""  # required: the checkpoint to fine-tune
    t = c.task
    t.benchmark = f"clue/{arg}"
    t.update(train=f"{folder}/train.json", dev=f"{folder}/dev.json", test=f"{folder}/test.json")
    if qa:
        t.update(doc_stride=128, max_query_length=64, max_answer_length=30, n_best=20)
        t.char_level = True
    else:
        t.update(text_a=text_a, text_b=text_b, label="label", id="id")
        t.labels = tuple(labels.split(","))
        if arg in ("cmnli", "ocnli"):
            t.skip_labels = SKIP_LABELS
    if arg in BASELINES:
        lr, batch, epochs, length = BASELINES[arg]
        c.optim.learning_rate, c.batch_size, c.num_epochs = lr, batch, epochs
        t.max_seq_length = length
    else:  # OCNLI: searched on dev
        use_new_task_defaults(c)
        t.max_seq_length = 128
    c.warmup_fraction = 0.1
    c.model.classifier_dropout = 0.1
    return c

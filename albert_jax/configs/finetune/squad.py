"""SQuAD v1.1 and v2.0 (English extractive QA) from the official files, with the ALBERT paper's
recipe and the official script's scoring. TASK: v1 (SQuAD v1.1), v2 (SQuAD v2.0).

  python -m albert_jax.convert HF_ALBERT_BASE_V2 runs/albert-base-v2  # transformers' or TF1 files
  python -m finetune --config configs/finetune/squad.py:v1 --workdir runs/squad/v1 \
      --config.task.data_dir=SQUAD_DIR --config.init=runs/albert-base-v2
  python evaluate-v1.1.py SQUAD_DIR/dev-v1.1.json runs/squad/v1/submission/predictions.json

`task.data_dir` holds the files as SQuAD's site serves them: train-v1.1.json and dev-v1.1.json
(v2.0: train-v2.0.json, dev-v2.0.json). SQuAD has no public test set: dev is the split scored,
and the one the best checkpoint is chosen on (F1), as the paper reports it. `init` is the
checkpoint to fine-tune (required): an English ALBERT such as albert-base-v2 converted with
`python -m albert_jax.convert`, whose SentencePiece tokenizer comes with it.

Scoring: the official script's rules (`albert_jax.scoring.squad`: lower-cased, punctuation and
articles removed, word-level F1 and exact match, the best over the gold answers; v2.0 also
HasAns / NoAns, with the no-answer threshold tuned on dev). Windows as the reference's
run_squad: stride 128, questions cut to 64 pieces, answers up to 30 pieces, 20-best decoding.

Hyperparameters: the ALBERT paper's Table 14: SQuAD1.1 learning rate 5e-5, batch 48, ALBERT
dropout 0, classifier dropout 0.1, 3649 steps with 365 warmup, max length 384; SQuAD2.0 3e-5,
48, 0, 0.1, 8144 steps with 814 warmup, length 512. (The paper's v2.0 head is XLNet-style; this
one is the plain start / end head with the tuned threshold: docs/finetuning.md.)

Outputs beyond every run's (docs/finetuning.md): WORKDIR/submission/predictions.json, the dev
set's answers as {question id: answer text} ("" for no answer in v2.0), what the official
evaluation script (and CodaLab) takes; written at the end with the best parameters.
"""

from albert_jax.configs.finetune.common import get_common

# TASK -> SQuAD's version (a config argument cannot hold a dot: `squad.py:v1`)
VERSIONS = {"v1": "v1.1", "v2": "v2.0"}
# version -> learning rate, batch, ALBERT dropout, train steps, warmup steps, max length
TABLE_14 = {
    "v1.1": (5e-5, 48, 0.0, 3649, 365, 384),
    "v2.0": (3e-5, 48, 0.0, 8144, 814, 512),
}


def get_config(arg: str | None = None):
    if arg not in VERSIONS:
        raise ValueError(f"squad.py:TASK with TASK one of {sorted(VERSIONS)}, got {arg!r}")
    arg = VERSIONS[arg]
    c = get_common("qa")
    c.init = ""  # required: the checkpoint to fine-tune (its tokenizer with it)
    t = c.task
    t.benchmark = f"squad/{arg}"
    t.update(train=f"train-{arg}.json", dev=f"dev-{arg}.json", test="")
    t.update(doc_stride=128, max_query_length=64, max_answer_length=30, n_best=20)
    t.char_level = False  # English: F1 over words
    lr, batch, dropout, steps, warmup, length = TABLE_14[arg]
    c.optim.learning_rate, c.batch_size, c.total_steps = lr, batch, steps
    c.warmup_fraction = warmup / steps
    c.model.hidden_dropout = c.model.attention_dropout = dropout
    c.model.classifier_dropout = 0.1
    t.max_seq_length = length
    return c

"""Your own sentence or sentence-pair task from TSV / CSV / JSONL files (header row naming the
columns), e.g. GLUE-style files; `task.type=regression` for a float label (STS-B):

  python -m finetune --config configs/finetune/tsv.py --workdir runs/my_task \
      --config.init=PATH/TO/CHECKPOINT --config.task.train=train.tsv --config.task.dev=dev.tsv \
      --config.task.text_a=sentence1 --config.task.text_b=sentence2 --config.task.label=label

Tagging files (CoNLL) work the same way with `task.type=tagging` (see ner.py).

Learning rate: chosen by the model's hidden size and printed at the start, e.g.
`learning rate 0.0003, head lr x10 (auto: hidden 128 <= 256; ...)`. Small models (hidden <= 256,
the project's CPU checkpoints) get 3e-4 with the fresh head (`^classifier/`) at 10x: at the
reference's 2e-5 they stay at the label prior. Base-and-larger (hidden >= 768, the released
checkpoints) get the papers' 2e-5 at 1x; in between both are interpolated geometrically (hidden
384: 1.1e-4, x4.3). `--config.optim.learning_rate=X` and `--config.optim.lr_multipliers=...`
(`''`: none) override each.

A random-init control of the same task: `--config.init=none --config.tokenizer=CKPT
--config.model_from=CKPT` (see common.py).
"""

from configs.finetune.common import get_common, use_auto_learning_rate


def get_config(arg: str | None = None):
    c = get_common(arg or "classification")
    use_auto_learning_rate(c)
    return c

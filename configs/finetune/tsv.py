"""Your own sentence or sentence-pair task from TSV / CSV / JSONL files (header row naming the
columns), e.g. GLUE-style files; `task.type=regression` for a float label (STS-B):

  python -m finetune --config configs/finetune/tsv.py --workdir runs/my_task \
      --config.init=PATH/TO/CHECKPOINT --config.task.train=train.tsv --config.task.dev=dev.tsv \
      --config.task.text_a=sentence1 --config.task.text_b=sentence2 --config.task.label=label

Tagging files (CoNLL) work the same way with `task.type=tagging` (see ner.py).
"""

from configs.finetune.common import get_common


def get_config(arg: str | None = None):
    c = get_common(arg or "classification")
    c.optim.learning_rate = 2e-5
    return c

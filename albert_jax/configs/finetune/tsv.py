"""Your own sentence or sentence-pair task from TSV / CSV / JSONL files (header row naming the
columns), e.g. GLUE-style files; `task.type=regression` for a float label (STS-B):

  python -m finetune --config configs/finetune/tsv.py --workdir runs/my_task \
      --config.init=PATH/TO/CHECKPOINT --config.task.train=train.tsv --config.task.dev=dev.tsv \
      --config.task.text_a=sentence1 --config.task.text_b=sentence2 --config.task.label=label

Tagging files (CoNLL) work the same way with `task.type=tagging` (see ner.py).

Learning rate: searched on dev (albert_jax/jobs/lr_search.py). Before the run, short trials
(together half the run's steps, so the run costs about 1.5x) try a grid by model size (hidden
<= 256, the project's CPU checkpoints: 3e-5, 1e-4, 3e-4; >= 768, the released checkpoints:
1e-5, 2e-5, 5e-5; geometric in between), each scored on dev; the best trial whose predictions
did not collapse to one class wins, on the first seed, once for all seeds. Every trial and the
choice are printed and written to WORKDIR/lr_search.json, results.json and summary.json. The
fresh head (`^classifier/`) trains at 10x on small models, 1x on base-and-larger. Set
`--config.optim.learning_rate=X` to skip the search, `--config.lr_search.grid=1e-5,3e-5` for
other rates, `--config.lr_search.enabled=False` for the rate by model size alone (3e-4 / 2e-5),
and `--config.optim.lr_multipliers=...` (`''`: none) for the head.

Length: `num_epochs` (3), and at least 800 steps (`min_steps`, the fewest the ALBERT paper
fine-tunes any task for): a training set under ~8.5k examples gets more epochs.

A random-init control of the same task: `--config.init=none --config.tokenizer=CKPT
--config.model_from=CKPT` (see common.py).
"""

from albert_jax.configs.finetune.common import get_common, use_new_task_defaults


def get_config(arg: str | None = None):
    c = get_common(arg or "classification")
    use_new_task_defaults(c)
    return c

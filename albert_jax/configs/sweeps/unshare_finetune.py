"""Shared against unshared fine-tuning ("use ALBERT as BERT") from one pretrained model, 3 seeds,
on the offline sentiment and NER tasks.

  python -m pretrain.sweep --config configs/sweeps/unshare_finetune.py --workdir runs/sw_unshare

One pretraining run (the README's, 1000 steps), then each task with the checkpoint's layout
(`unshare=''`, all-shared), with `unshare=all` (every layer its own copy) and from random weights
of the checkpoint's shape and tokenizer (`init=none`: the "random init" row, the control for
what pretraining adds), seeds 0, 1, 2; one epoch each: about an hour on a 2-core CPU (45
minutes before the random-init row). More tasks: add them to `tasks` (relation.py,
entities.py, cloze.py, race.py). Paper scale: `pretrain_config='configs/pretrain/paper.py'`, or
drop pretraining and fine-tune a released checkpoint directly with `python -m finetune
--config.init=PATH` (one command per task and layout, see docs/finetuning.md).
"""

from albert_jax.experiments.sweep import Sweep

PAPER = """Published (Chinese ALBERT small/tiny, 3 seeds, no variance reported): unshared matched or
beat shared on IFLYTEK, relation extraction and seq2seq reading comprehension (+0.2 to +2.7
points, 61.1 vs 46.6 relation F1 after the first epoch), sentiment about equal."""


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py", "ner": "configs/finetune/ner.py"},
        grid={"finetune.unshare": ["", "all"]},
        finetune={"num_epochs": 1.0},
        seeds=(0, 1, 2),
        paper=PAPER,
        random_init=True,
    )

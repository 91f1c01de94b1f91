"""A sweep small enough for a test or a first look (a few minutes on a 2-core CPU): two
layouts x shared / unshared fine-tuning, a few steps each, two seeds.

  python -m pretrain.sweep --config configs/sweeps/tiny.py --workdir runs/sw_tiny
"""

from albert_jax.sweep import Sweep


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"pretrain.model.layout": ["all", "none"], "finetune.unshare": ["", "all"]},
        pretrain={
            "total_steps": 4, "eval_every": 2, "eval_batches": 1, "checkpoint_every": 4,
            "log_every": 2, "data.vocab_size": 1000, "data.global_batch_size": 8,
        },
        finetune={"total_steps": 4, "eval_every": 2, "batch_size": 8},
        seeds=(0, 1),
    )  # fmt: skip

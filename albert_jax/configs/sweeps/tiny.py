"""A sweep small enough for a test or a first look (~5 CPU minutes: 7-9 minutes on a busy 2-core
machine, mostly starting and compiling 12 runs): two layouts x shared / unshared fine-tuning, a
few steps each, two seeds. tests/integration/test_sweep_runs.py runs it as shipped (slow).

  python -m pretrain.sweep --config configs/sweeps/tiny.py --workdir runs/sw_tiny
"""

from albert_jax.experiments.sweep import Sweep


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"pretrain.model.layout": ["all", "none"], "finetune.unshare": ["", "all"]},
        # The vocabulary must hold every character SentencePiece keeps of the corpus (3936 at
        # character_coverage 0.9995); the warmup fits in the 4 steps. Logged every 2 steps: the
        # report's step time leaves out the first, compiling interval.
        pretrain={
            "total_steps": 4, "eval_every": 2, "eval_batches": 1, "checkpoint_every": 4,
            "log_every": 2, "data.vocab_size": 4000, "data.global_batch_size": 8,
            "optim.warmup_steps": 1,
        },
        # One evaluation (of the whole dev set) per seed and 64 training reviews: what a
        # fine-tuning run costs here is mostly its start and its evaluations.
        finetune={
            "total_steps": 4, "eval_every": 4, "batch_size": 8, "log_every": 2,
            "max_train_examples": 64,
        },
        seeds=(0, 1),
    )  # fmt: skip

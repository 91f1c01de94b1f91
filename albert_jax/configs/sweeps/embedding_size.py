"""Paper Table 3: the embedding size E, not-shared and all-shared, pretrained then fine-tuned.

  python -m pretrain.sweep --config configs/sweeps/embedding_size.py --workdir runs/sw_embedding

Scaled to a 2-core CPU (about 40 minutes): the README's small model (H=128, L=4) at E in
(32, 64, 128), 400 pretraining steps, sentiment fine-tuned for 300 steps, one seed. Paper scale:
ALBERT-base, E in (64, 128, 256, 768), `configs/pretrain/paper.py`, SQuAD / MNLI / SST-2 / RACE.
Each pretraining run also gets a "random init" fine-tuning run (its shape and tokenizer, fresh
weights: what pretraining adds), about a minute each here. With one seed the report can give no
p-value: `--set seeds=0,1,2` (three times the fine-tuning time) for Welch's test against it.
"""

from albert_jax.experiments.sweep import Sweep

PAPER = """ALBERT-base, average of SQuAD1.1/2.0, MNLI, SST-2, RACE (params):

| E | not-shared | all-shared |
|---|---|---|
| 64 | 81.3 (87M) | 79.0 (10M) |
| 128 | 81.7 (89M) | 80.1 (12M) |
| 256 | 81.8 (93M) | 79.6 (16M) |
| 768 | 82.3 (108M) | 79.8 (31M) |
"""


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={
            "pretrain.model.layout": ["none", "all"],
            "pretrain.model.embedding_size": [32, 64, 128],
        },
        pretrain={"total_steps": 400, "eval_every": 100, "checkpoint_every": 200},
        finetune={"total_steps": 300, "eval_every": 100},
        seeds=(0,),
        random_init=True,  # each pretraining run's shape from random weights: the control
        paper=PAPER,
    )

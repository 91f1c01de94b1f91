"""Paper Table 4: cross-layer sharing layouts (all-shared, shared-attention, shared-FFN,
not-shared) at two embedding sizes, pretrained here then fine-tuned on sentiment.

  python -m pretrain.sweep --config configs/sweeps/sharing_ablation.py --workdir runs/sw_sharing

Scaled to a 2-core CPU (about 50 minutes): the README's small model (H=128, L=4, 2 heads) at
E=64 and E=128 (E=H), 400 pretraining steps each, sentiment fine-tuned for 300 steps, one seed.
Paper scale: ALBERT-base (H=768, L=12) at E=128 and E=768, 125k steps of 4096 sequences of 512,
then SQuAD 1.1/2.0, MNLI, SST-2 and RACE: `pretrain_config='configs/pretrain/paper.py'`,
`pretrain={}`, E in (128, 768), and the GLUE/SQuAD/RACE fine-tuning configs as tasks.
Each pretraining run also gets a "random init" fine-tuning run (its shape and tokenizer, fresh
weights: what pretraining adds), about a minute each here. With one seed the report can give no
p-value: `--set seeds=0,1,2` (three times the fine-tuning time) for Welch's test against it.
"""

from albert_jax.experiments.sweep import Sweep

PAPER = """ALBERT-base, average of SQuAD1.1/2.0, MNLI, SST-2, RACE (params):

| E | all-shared | shared-attention | shared-FFN | not-shared |
|---|---|---|---|---|
| 768 | 79.8 (31M) | 81.6 (83M) | 79.5 (57M) | 82.3 (108M) |
| 128 | 80.1 (12M) | 81.7 (64M) | 80.2 (38M) | 81.6 (89M) |
"""


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={
            "pretrain.model.embedding_size": [64, 128],
            "pretrain.model.layout": ["all", "attention", "ffn", "none"],
        },
        pretrain={"total_steps": 400, "eval_every": 100, "checkpoint_every": 200},
        finetune={"total_steps": 300, "eval_every": 100},
        seeds=(0,),
        random_init=True,  # each pretraining run's shape from random weights: the control
        paper=PAPER,
    )

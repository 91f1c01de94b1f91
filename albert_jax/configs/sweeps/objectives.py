"""Pretraining objectives at equal training FLOPs: MLM + SOP, MLM alone, ELECTRA, then fine-tuned.

  python -m pretrain.sweep --config configs/sweeps/objectives.py --workdir runs/sw_objectives

Scaled to a 2-core CPU (about 35 minutes): the README's model (all-shared, E=H=128, L=4), each
objective given the training FLOPs of 600 MLM + SOP steps (`train_flops`: ELECTRA's generator,
a quarter of the width, costs 8 % more per step, so it gets 554 steps), then sentiment fine-tuned
for 300 steps with seeds 0, 1, 2. The table's `train PFLOP` column is the compute each run spent.
Paper scale (ELECTRA Table 1 / ALBERT's SOP ablation): `configs/pretrain/paper.py`, a budget of
e.g. 1e20 FLOPs, the GLUE / SQuAD tasks.
Each pretraining run also gets a "random init" fine-tuning run (its shape and tokenizer, fresh
weights: what pretraining adds), about a minute a seed here; the report gives Welch's p of each
objective's test accuracy against it.
"""

from albert_jax.experiments.sweep import Sweep

PAPER = """ELECTRA (Clark et al. 2020, Table 1 / Fig. 3): at equal pretraining compute
replaced-token detection beats MLM on GLUE (ELECTRA-Small 79.9 vs BERT-Small 75.1 GLUE dev),
most clearly for small models. ALBERT (Table 5, downstream average): MLM + SOP 80.1,
MLM + NSP 79.2, MLM alone 79.0."""


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"pretrain.objective": ["mlm+sop", "mlm", "electra"]},
        pretrain={"train_flops": 600 * 12_469_714_944, "eval_every": 150, "checkpoint_every": 300},
        finetune={"total_steps": 300, "eval_every": 100},
        seeds=(0, 1, 2),
        random_init=True,  # each pretraining run's shape from random weights: the control
        paper=PAPER,
    )

"""Paper Table 5: sentence-order prediction against next-sentence prediction, pretrained then
fine-tuned (the held-out MLM and SOP / NSP accuracy of each run is in the table).

  python -m pretrain.sweep --config configs/sweeps/sop_vs_nsp.py --workdir runs/sw_sop

Scaled to a 2-core CPU (about 25 minutes): the README's model, 600 pretraining steps per
objective, sentiment fine-tuned for 300 steps, one seed. Each run reports its own objective's
held-out accuracy, and with `cross_eval` the sentence head is also scored on held-out pairs of
the other task (the paper's cross accuracies: an NSP model on SOP and the reverse; `SOP task` and
`NSP task` columns). Paper scale: ALBERT-base, `configs/pretrain/paper.py`, with NSP as
`objective=mlm+nsp` (`data.mode=nsp`: random-document negatives, no swapping).
Each pretraining run also gets a "random init" fine-tuning run (its shape and tokenizer, fresh
weights: what pretraining adds), about a minute each here. With one seed the report can give no
p-value: `--set seeds=0,1,2` (three times the fine-tuning time) for Welch's test against it.
"""

from albert_jax.experiments.sweep import Sweep

PAPER = """ALBERT-base, intrinsic MLM / NSP / SOP accuracy; downstream average:

| objective | MLM | NSP | SOP | average |
|---|---|---|---|---|
| none | 54.9 | 52.4 | 53.3 | 79.0 |
| NSP | 54.5 | 90.5 | 52.0 | 79.2 |
| SOP | 54.0 | 78.9 | 86.5 | 80.1 |
"""


def get_sweep() -> Sweep:
    return Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"pretrain.objective": ["mlm+sop", "mlm+nsp"]},
        pretrain={
            "total_steps": 600,
            "eval_every": 150,
            "checkpoint_every": 300,
            "cross_eval": True,
        },
        finetune={"total_steps": 300, "eval_every": 100},
        seeds=(0,),
        random_init=True,  # each pretraining run's shape from random weights: the control
        paper=PAPER,
    )

"""Stage 2 of the CPU recipe: continue `cpu_base.py`'s model on the in-domain text alone
(domain-adaptive pretraining), at the fine-tuning length; 1000 steps, ~19 minutes on two CPU
cores, so the two stages together stay under an hour (docs/results.md, section 1).

  python -m finetune.prepare sentiment      # the in-domain text (train split only), once
  python -m pretrain --config configs/pretrain/cpu_base.py --workdir runs/cpu_base
  python -m pretrain --config configs/pretrain/cpu_base_domain.py --workdir runs/cpu_base_domain

Starts from `runs/cpu_base/model` (`init`; its tokenizer and shape come with it) and reads only
the sentiment task's *training* reviews (labels unused; dev and test are never read). Sequences
of 128, the fine-tuning length, so position embeddings 64-127, unused by stage 1, are trained;
the peak learning rate is half of stage 1's, since the weights are already trained.
"""

import ml_collections

from albert_jax.configs.pretrain import cpu_base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = cpu_base.get_config(arg)
    config.init = "runs/cpu_base/model"
    config.data.input_files = "jsonl:data/finetune/sentiment/train.jsonl"
    config.data.max_seq_length = 128
    config.data.max_predictions = 20  # 0.15 * 128, as the reference at this length
    config.total_steps = 1000
    config.optim.warmup_steps = 100
    config.optim.learning_rate = 2e-3
    config.checkpoint_every = 250
    config.eval_every = 250
    return config

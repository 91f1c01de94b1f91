"""ELECTRA replaced-token detection with ALBERT sharing, at the README's CPU scale.

  python -m pretrain --config configs/pretrain/electra_small.py --workdir runs/electra_small

The discriminator is `cpu_small.py`'s model (E=128, H=128, L=4, all-shared); the generator is a
quarter of its width (H=32, 1 head, I=128) with its own all-shared layer, the same n-gram masked
batches feed it, and the token and position tables are shared. WORKDIR/model holds the
discriminator backbone, ready for `python -m finetune --config.init=WORKDIR/model` and for
`python -m albert_jax.convert WORKDIR/model OUT --to hf` (transformers' AlbertModel).

Change the networks with e.g.

  --config.model.layout=none                   (the discriminator's sharing)
  --config.electra.generator_layout=none       (the generator's)
  --config.electra.generator_fraction=0.5
  --config.electra.sentence_head=True          (SOP on the discriminator too)

Paper scale (ELECTRA-base: generator a third of the width, lambda 50, mask 15 %):
`configs/pretrain/paper.py` with `--config.objective=electra` and a generator_fraction of 0.33.
"""

import ml_collections

from albert_jax.configs.pretrain import cpu_small


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = cpu_small.get_config(arg)
    config.objective = "electra"
    return config

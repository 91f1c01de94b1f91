"""Pretraining's own settings: one typed section, its defaults in one place.

`configs/pretrain/common.py:pretrain_defaults` builds every pretraining config from
`TrainerConfig.section()` and `PretrainConfig.section()` (plus the optimizer's section; the model
and data sections are added by each config, the latter from
`albert_jax.data.pretraining.config.DataConfig`),
so each leaf below exists and parses on the command line (`--config.objective=mlm`); the library
reads them back with `from_config`, never with a default of its own. The checks that need more
than this section are `albert_jax.tasks.pretraining.objective_of` and its tasks.
"""

from __future__ import annotations

import dataclasses

from albert_jax.model.electra import DEFAULT_WEIGHT
from albert_jax.sections import Section
from albert_jax.train.config import EvalConfig

OBJECTIVES = ("mlm+sop", "mlm+nsp", "mlm", "electra")
# `config.evals` of every pretraining config (`albert_jax.train.config.EvalConfig`): the
# `eval_split`'s `eval_batches` batches every `eval_every` steps (no best model: nothing final).
PRETRAIN_EVALS = {"eval": EvalConfig()}


@dataclasses.dataclass(frozen=True)
class Electra(Section):
    """`objective='electra'`: the generator (`albert_jax.model.electra.generator_config`) and
    the loss."""

    generator_fraction: float = 0.25  # of the discriminator's hidden, heads, intermediate
    generator_layout: str = "all"  # its own sharing layout (all | attention | ffn | none)
    generator_layers: int = 0  # 0: as many as the discriminator
    disc_weight: float = DEFAULT_WEIGHT  # loss = generator MLM + disc_weight * discriminator BCE
    sentence_head: bool = False  # also SOP (data.mode's pairs) on the discriminator


@dataclasses.dataclass(frozen=True)
class PretrainConfig(Section):
    init: str = ""  # continued pretraining: this checkpoint (see albert_jax/pretrain/__main__.py)
    # mlm+sop | mlm+nsp (with data.mode='nsp') | mlm | electra (albert_jax/tasks/pretraining.py)
    objective: str = "mlm+sop"
    electra: Electra = Electra()
    train_flops: float = 0.0  # > 0: total_steps from this training-FLOPs budget (equal compute)
    eval_batches: int = 20
    cross_eval: bool = False  # also score the sentence head on SOP and NSP pairs (paper Table 5)
    train_split: str = "train[:99%]"
    eval_split: str = "train[99%:]"

    @property
    def sentence_head(self) -> bool:
        """Whether the run trains a sentence head on the pairs (as `make_task` decides)."""
        if self.objective == "electra":
            return bool(self.electra.sentence_head)
        return self.objective != "mlm"

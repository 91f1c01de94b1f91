"""Pretraining's own settings: one typed section, its defaults in one place.

`configs/pretrain/common.py:pretrain_defaults` builds every pretraining config from
`TrainerConfig.section()` and `PretrainConfig.section()` (plus the optimizer's section; the model
and data sections are added by each config, the latter from `albert_jax.data.config.DataConfig`),
so each leaf below exists and parses on the command line (`--config.objective=mlm`); the library
reads them back with `from_config`, never with a default of its own. The checks that need more
than this section are `albert_jax.tasks.pretraining.objective_of` and its tasks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections

from albert_jax.model.electra import DEFAULT_WEIGHT

OBJECTIVES = ("mlm+sop", "mlm+nsp", "mlm", "electra")


@dataclasses.dataclass(frozen=True)
class Electra:
    """`objective='electra'`: the generator (`albert_jax.model.electra.generator_config`) and
    the loss."""

    generator_fraction: float = 0.25  # of the discriminator's hidden, heads, intermediate
    generator_layout: str = "all"  # its own sharing layout (all | attention | ffn | none)
    generator_layers: int = 0  # 0: as many as the discriminator
    disc_weight: float = DEFAULT_WEIGHT  # loss = generator MLM + disc_weight * discriminator BCE
    sentence_head: bool = False  # also SOP (data.mode's pairs) on the discriminator


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    init: str = ""  # continued pretraining: start from this checkpoint (see pretrain/__main__.py)
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

    @classmethod
    def section(cls) -> ml_collections.ConfigDict:
        """The defaults as config leaves (what every pretraining config starts from)."""
        return ml_collections.ConfigDict(dataclasses.asdict(cls()))

    @classmethod
    def from_config(cls, config: Any) -> PretrainConfig:
        """Pretraining's leaves of a job's config (leaves it lacks take the defaults above; its
        other sections are not read)."""
        values = {f.name: config[f.name] for f in dataclasses.fields(cls) if f.name in config}
        if "electra" in values:
            given = values["electra"] or {}
            fields = [f.name for f in dataclasses.fields(Electra) if f.name in given]
            values["electra"] = Electra(**{name: given[name] for name in fields})
        return cls(**values)

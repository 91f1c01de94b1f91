"""Fine-tuning's own settings: one typed section, its defaults in one place.

`configs/finetune/common.py` builds every fine-tuning config from `TrainerConfig.section()` and
`FinetuneConfig.section()` (plus the optimizer, model-override and task sections), so each leaf
below exists and parses on the command line; the library reads them back with `from_config`,
never with a default of its own. No pretraining leaf is part of a fine-tuning config.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from albert_jax.errors import InputError
from albert_jax.sections import Section


class FinetuneError(InputError):
    """A fine-tuning setup that cannot work (the message says what to change)."""


@dataclasses.dataclass(frozen=True)
class LrSearch(Section):
    """The learning-rate search (`albert_jax.tasks.lr_search`), on when the rate is left to
    auto (`optim.learning_rate` None)."""

    enabled: bool = False
    grid: Any = ""  # '' = by model size, else e.g. '1e-5,3e-5,1e-4' (or a sequence)
    budget: float = 0.5  # all trials together, in units of the full run's steps (0.5: 1.5x)
    # when every trial collapsed, run them again at twice the length, at most this many times
    # (chosen on hsk: half an epoch left every rate at the prior, one epoch did not)
    retries: int = 2

    def __post_init__(self):
        if not isinstance(self.budget, int | float) or not 0 < self.budget <= 10:
            raise FinetuneError(f"lr_search.budget must be in (0, 10], got {self.budget!r}")
        r = self.retries
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise FinetuneError(f"lr_search.retries must be an integer >= 0, got {r!r}")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig(Section):
    # Ours, a transformers dir, a TF1 checkpoint or a pretraining workdir; 'none': random weights
    # (the control: needs `tokenizer` and `model_from`, see configs/finetune/common.py)
    init: str = "runs/cpu_small/model"
    model_from: str = ""  # init='none': the shape (checkpoint / workdir / config.json / preset)
    unshare: str = ""  # '' keeps the checkpoint's layout; all | attention | ffn: per-layer copies
    fresh_params: Any = ""  # path regexes that start fresh even if the checkpoint has them
    # '' = the checkpoint's tokenizer; else a tokenizer directory (spiece.model / vocab.txt), a
    # checkpoint or a pretraining workdir whose tokenizer to use
    tokenizer: str = ""
    seeds: Any = ""  # '0,1,2': one run per seed in WORKDIR/seed_S, then mean ± std
    batch_size: int = 32
    eval_batch_size: int = 0  # 0: batch_size
    num_epochs: float = 3.0
    min_steps: int = 0  # > 0: at least this many steps (more epochs on a small training set)
    warmup_fraction: float = 0.1
    max_train_examples: int = 0  # > 0: the first N training examples only
    best_metric: str = ""  # '' = accuracy / pearson / f1 by task type
    lr_search: LrSearch = LrSearch()

    def __post_init__(self):
        warmup = self.warmup_fraction
        if not 0 <= warmup <= 1:
            raise FinetuneError(f"warmup_fraction must be between 0 and 1, got {warmup!r}")

    def check_epochs(self, total_steps: int) -> None:
        """Without `total_steps` the steps come from `num_epochs`, which must then be > 0."""
        epochs = self.num_epochs
        if not total_steps and not (math.isfinite(epochs) and epochs > 0):
            raise FinetuneError(f"num_epochs must be > 0 (or total_steps set), got {epochs!r}")

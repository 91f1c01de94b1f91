"""Relation extraction (DuIE-style triples) from People's Daily 1998-01.

  python -m finetune --config configs/finetune/relation.py --workdir runs/ft_relation
  python -m finetune --config configs/finetune/relation.py --workdir runs/ft_relation_unshared \
      --config.unshare=all --config.seeds=0,1,2

bert4keras' "half-pointer half-tagging" (`albert_jax.tasks.relation`): subject start / end per
token, then for one subject (sampled in training, each predicted one at evaluation) object start
/ end per token and predicate; exact-triple F1. The data (`python -m finetune.prepare relations`,
built on first use) holds (person, 职务 / 所属地区 / 所属机构, title / place / organisation)
triples derived from the corpus's tags. Starts from the README's pretraining run
(`runs/cpu_small/model`). Any DuIE-style JSONL works the same way:
`--config.task.train=train.jsonl --config.task.dev=dev.jsonl --config.task.test=""`.
"""

from albert_jax.configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("relation")
    use_prepared(c, "relations", "jsonl")
    c.task.max_seq_length = 128  # the README checkpoint's max_position_embeddings
    c.task.predicates = ()  # () = the sorted predicates of the training file
    c.task.max_subjects = 8  # subject candidates decoded per text at evaluation
    c.task.max_span_length = 32  # pieces of a decoded subject or object
    c.task.threshold = 0.5  # start / end probability that opens / closes a span
    c.optim.learning_rate = 3e-4  # see sentiment.py
    c.optim.lr_multipliers = "^classifier/=10"  # the fresh head, as ner.py
    c.num_epochs = 10.0  # ~2.5k training texts: 77 steps an epoch at batch 32
    return c

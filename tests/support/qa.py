"""Extractive QA for the fine-tuning tests: SQuAD files of the fixture words (the `qa_files`
fixture, tests/conftest.py) and a short config over them."""

import json

from helpers import split_files_config

from support.finetune import WORDS

N_DEV = 7


def squad_file(path, rng, n, context_words_=(20, 40), impossible_every=3):
    """Contexts of fixture-vocabulary words; the answer is a word pair occurring in it."""
    data = []
    for i in range(n):
        ctx = " ".join(rng.choice(WORDS, int(rng.integers(*context_words_))))
        words = ctx.split()
        k = int(rng.integers(0, len(words) - 1))
        answer = " ".join(words[k : k + 2])
        start = len(" ".join(words[:k])) + (1 if k else 0)
        qa = {"id": f"q{i}", "question": f"where is {words[k + 1]}"}
        if impossible_every and i % impossible_every == 2:
            qa.update(answers=[], is_impossible=True)
        else:
            qa.update(answers=[{"text": answer, "answer_start": start}], is_impossible=False)
        data.append({"title": str(i), "paragraphs": [{"context": ctx, "qas": [qa]}]})
    with open(path, "w") as f:
        json.dump({"version": "v2.0", "data": data}, f, indent=1)


def qa_config(init, d, **kw):
    task = dict(max_seq_length=24, doc_stride=6, max_query_length=6, max_answer_length=4,
                n_best=5, char_level=False)  # fmt: skip
    return split_files_config("qa", init, d, "json", 4, task, **kw)

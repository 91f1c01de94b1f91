"""Relation extraction for the fine-tuning tests: DuIE files of the fixture words (the `re_files`
fixture, tests/conftest.py) and a short config over them."""

import json

from helpers import split_files_config

from support.finetune import WORDS

N_DEV = 13  # not a multiple of the evaluation batch (8)


def duie_file(path, rng, n):
    """Texts of fixture-vocabulary words; triples between words in them (some texts none)."""
    with open(path, "w") as f:
        for i in range(n):
            words = list(rng.choice(WORDS, int(rng.integers(4, 9))))
            spo = []
            if i % 4 != 3:
                a, b = rng.choice(len(words), 2, replace=False)
                spo.append({"subject": words[a], "predicate": "near", "object": words[b]})
                spo.append({"subject": words[a], "predicate": "has", "object": words[-1]})
            f.write(json.dumps({"text": " ".join(words), "spo_list": spo}) + "\n")


def re_config(init, d, **kw):
    # Threshold 0: every text piece opens and closes a span, whatever the weights, so the
    # decoded triples are known: the words of the first 3 pieces as subjects, every word of
    # the kept text as an object of both predicates.
    task = dict(max_seq_length=16, predicates=(), max_subjects=3, max_span_length=4, threshold=0.0)
    return split_files_config("relation", init, d, "jsonl", 2, task, **kw)

"""Hand-written samples in the official layouts (tests/fixtures/formats), read through the
project's readers: SQuAD v2.0 (read_squad), RACE (read_race), seq2seq JSONL (read_seq2seq)."""

from __future__ import annotations

import json
import os

from albert_jax.data.finetuning import textgen
from albert_jax.tasks.choice import fill_blank, read_race
from albert_jax.tasks.qa import read_squad

FORMATS = os.path.join(os.path.dirname(__file__), "fixtures", "formats")
SQUAD = os.path.join(FORMATS, "squad_v2_sample.json")
RACE = os.path.join(FORMATS, "race_sample.json")
SEQ2SEQ = os.path.join(FORMATS, "seq2seq_sample.jsonl")


def test_squad_v2_sample_offsets_are_right():
    # The fixture itself, independently of the reader: every answer and plausible answer sits at
    # its answer_start, and only unanswerable questions carry plausible answers.
    with open(SQUAD, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["version"] == "v2.0" and len(doc["data"]) == 2
    checked = 0
    for article in doc["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                assert ("plausible_answers" in qa) == qa["is_impossible"]
                assert bool(qa["answers"]) != qa["is_impossible"]
                for a in qa["answers"] + qa.get("plausible_answers", []):
                    start = a["answer_start"]
                    assert para["context"][start : start + len(a["text"])] == a["text"]
                    checked += 1
    assert checked == 14


def test_squad_v2_sample_through_read_squad():
    examples, stats = read_squad(SQUAD)
    assert stats == {"answers_not_found": 0}
    assert len(examples) == 10
    by_id = {ex.qid: ex for ex in examples}
    assert list(by_id) == [
        "fp-01", "fp-02", "fp-03", "fp-04", "fp-05", "fp-06", "pe-01", "pe-02", "pe-03", "pe-04"
    ]  # fmt: skip
    unanswerable = {q for q, ex in by_id.items() if not ex.answers}
    assert unanswerable == {"fp-03", "fp-06", "pe-03"}
    for q in unanswerable:  # plausible answers are not answers
        assert by_id[q].answer_start is None
    for ex in examples:
        if ex.answers:
            start = ex.answer_start
            assert ex.context[start : start + len(ex.answers[0])] == ex.answers[0]
    assert by_id["fp-01"].answers == ("1874", "1874", "in 1874")  # dev-style multiple answers
    assert by_id["pe-01"].answers == ("普洱府", "以普洱府为集散地")
    assert by_id["pe-04"].answer_start == by_id["pe-04"].context.index("澜沧江") == 22
    assert by_id["fp-05"].where.endswith("data[0].paragraphs[1].qas[0]")
    assert len({ex.context for ex in examples}) == 4  # 2 articles x 2 paragraphs


def test_race_sample_through_read_race():
    examples = read_race(RACE)
    assert [ex.qid for ex in examples] == [f"high9001.txt-{k}" for k in range(4)]
    assert [ex.label for ex in examples] == [2, 0, 3, 1]  # answers C, A, D, B
    assert all(len(ex.options) == 4 for ex in examples)
    assert len({ex.article for ex in examples}) == 1
    assert examples[0].options[examples[0].label] == "in her grandfather's garden"
    blank = examples[1]
    assert "_" in blank.question and blank.options[blank.label] == "patient"
    filled = fill_blank(blank.question, blank.options[blank.label])
    assert (
        filled == "The writer's grandfather was patient when she pulled up the carrots too early."
    )
    assert fill_blank(examples[0].question, "x") == examples[0].question + " x"


def test_seq2seq_sample_through_read_seq2seq():
    examples, stats = textgen.read_seq2seq(SEQ2SEQ)
    assert stats == {"examples": 4, "with_target": 4}
    assert [ex.where for ex in examples] == [f"seq2seq_sample.jsonl:{n}" for n in (1, 2, 4, 5)]
    assert examples[1].target == textgen.NO_ENTITY
    assert examples[3].source.startswith("The keepers") and examples[3].source.endswith("gallery.")
    # The entity-style target names only what is in its source.
    pairs = textgen.parse_entities(examples[0].target)
    assert len(pairs) == 6 and all(name in examples[0].source for _, name in pairs)
    assert {label for label, _ in pairs} == set(textgen.ENTITY_LABELS.values())

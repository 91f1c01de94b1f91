"""Extractive QA end to end: SQuAD reading with named errors, sliding windows (every context
piece answerable in exactly one window, targets that map back to the answer text), training from
a checkpoint (unshared from the command line: tests/integration/test_finetune_cli.py),
evaluation of every question over all its windows, v2 threshold tuned on dev, predictions in the
official format."""

import json

import numpy as np
import pytest
from support.finetune import TOKENIZER
from support.qa import N_DEV, qa_config

from albert_jax.checkpoints import checkpoint
from albert_jax.data.finetuning.records import DataError
from albert_jax.jobs import run as runs
from albert_jax.scoring import squad
from albert_jax.tasks import finetuning as F
from albert_jax.tasks.qa import (
    OffsetError,
    QAExample,
    context_words,
    featurize_qa,
    read_squad,
    training_examples,
)
from albert_jax.text.tokenization import load_tokenizer


def test_windows_cover_the_context_once_and_targets_map_back(qa_files):
    tok = load_tokenizer(TOKENIZER)
    examples, counts = read_squad(qa_files / "train.json")
    assert counts == {"answers_not_found": 0}
    feats, stats = featurize_qa(examples, tok, 24, 6, 6)
    assert stats["windows"] > stats["examples"] and stats["multi_window"] > 0
    for e, ex in enumerate(examples):
        rows = np.flatnonzero(feats["example_index"] == e)
        spans = [tuple(o) for r in rows for o in feats["offsets"][r] if o[0] >= 0]
        # Every word's pieces are answerable in exactly one window (the max-context rule).
        assert sorted(set(spans)) == sorted(context_words(ex.context))
        hits = [r for r in rows if feats["start_positions"][r] > 0]
        if ex.answer_start is None:
            assert not hits  # unanswerable: every window points at [CLS]
            continue
        assert hits, ex.where  # 2-word answers always fit some window of 13 context pieces
        for r in hits:
            s, t = feats["start_positions"][r], feats["end_positions"][r]
            assert feats["token_type_ids"][r, s] == 1 and feats["attention_mask"][r, t] == 1
            o = feats["offsets"][r]
            # The target's character span is the answer (when both ends are answerable here).
            if o[s][0] >= 0 and o[t][0] >= 0:
                assert ex.context[o[s][0] : o[t][1]] == ex.answers[0]


def test_qa_trains_and_scores_every_question_over_its_windows(pretrained, qa_files, tmp_path):
    config = qa_config(pretrained, qa_files, total_steps=0, num_epochs=1.0)
    runs.run(config, str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    # An epoch is a pass over the windows (several per question), not over the questions.
    windows = featurize_qa(read_squad(qa_files / "train.json")[0], load_tokenizer(TOKENIZER),
                           24, 6, 6)[1]["windows"]  # fmt: skip
    assert json.load(open(tmp_path / "config.json"))["total_steps"] == -(-windows // 8) > 2
    assert results["metric"] == "f1"
    dev = [json.loads(x) for x in open(tmp_path / "predictions" / "dev.jsonl")]
    assert [r["id"] for r in dev] == [f"q{i}" for i in range(N_DEV)]
    official = json.load(open(tmp_path / "predictions" / "dev_official.json"))
    assert official == {r["id"]: r["prediction"] for r in dev}
    golds = {r["id"]: r["answers"] for r in dev}
    again = squad.squad_evaluate(golds, official)  # the written predictions give the metrics
    assert again["f1"] == pytest.approx(results["dev"]["f1"])
    assert again["exact"] == pytest.approx(results["dev"]["exact"])
    ctx = {r["id"]: r for r in dev}
    for r in dev:  # predictions are spans of the context (or no answer)
        assert r["prediction"] == "" or r["prediction"] in open(qa_files / "dev.json").read()
    assert "null_threshold" in results["dev"] and ctx
    head = checkpoint.load_head(tmp_path / "best")
    assert head["type"] == "question_answering" and head["doc_stride"] == 6


def test_bad_squad_files_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n {"paragraphs": [}\n]}')
    with pytest.raises(DataError, match=r"bad.json:2:\d+: not valid JSON"):
        read_squad(bad)
    bad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": 1}]}]}]}))
    with pytest.raises(
        DataError, match=r"data\[0\].paragraphs\[0\].qas\[0\]: missing key 'question'"
    ):
        read_squad(bad)
    qa = {"id": "x", "question": "q", "answers": [{"text": "b", "answer_start": 0}]}
    bad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [qa]}]}]}))
    examples, counts = read_squad(bad)  # answer not at its offset: counted, no training target
    assert counts["answers_not_found"] == 1 and examples[0].answer_start is None
    assert examples[0].answers == ("b",)


def test_a_negative_answer_start_is_not_at_its_text(tmp_path):
    """Python's slice counts a negative offset from the end, where the text may well be: still
    not an offset, so counted as a miss (and left out of training) like any other."""
    qas = [
        {"id": "neg", "question": "q", "answers": [{"text": "b", "answer_start": -5}]},
        {"id": "far", "question": "q", "answers": [{"text": "b", "answer_start": 99}]},
        {"id": "ok", "question": "q", "answers": [{"text": "b", "answer_start": 0}]},
    ]
    path = tmp_path / "neg.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "b a c", "qas": qas}]}]}))
    examples, counts = read_squad(path)
    assert counts["answers_not_found"] == 2
    assert [e.answer_start for e in examples] == [None, None, 0]  # "b a c"[-5:-4] == "b"
    assert [e.given_start for e in examples] == [-5, 99, 0]
    with pytest.raises(OffsetError, match=r"2 of 3 .*answer_start -5 holds '', 'b' is at 0"):
        training_examples(examples, "neg.json")


def _misplace(src, dst, qids):
    """A copy of SQuAD file `src` whose questions `qids` have answer_start one past their text."""
    doc = json.load(open(src))
    for article in doc["data"]:
        for qa in article["paragraphs"][0]["qas"]:
            if qa["id"] in qids:
                qa["answers"][0]["answer_start"] += 1
    json.dump(doc, open(dst, "w"))


def test_answers_not_at_their_offsets_are_not_trained_as_unanswerable(
    pretrained,
    qa_files,
    tmp_path,
    capsys,
):
    """A training question whose answer is not at its offset is skipped (named in a note), not
    trained on as "no answer"; a dev question keeps its texts for scoring; a file with more than
    10% of them is refused as one error (another offset convention)."""
    _misplace(qa_files / "train.json", tmp_path / "train.json", {"q0"})  # 1 of 11 answered
    _misplace(qa_files / "dev.json", tmp_path / "dev.json", {"q0"})
    _misplace(qa_files / "test.json", tmp_path / "test.json", set())
    data = F.FinetuneData(qa_config(pretrained, tmp_path, total_steps=0))
    assert [e.qid for e in data.examples["train"]] == [f"q{i}" for i in range(1, 16)]
    assert data.stats["train"]["skipped"] == 1
    assert len(data.examples["dev"]) == N_DEV and data.stats["dev"]["answers_not_found"] == 1
    runs._print_data(data)
    out = capsys.readouterr().out
    assert f"note: {tmp_path / 'train.json'}: 1 of 11 answered questions skipped" in out
    assert "train.json: data[0].paragraphs[0].qas[0] (id 'q0')" in out
    assert "train: 15 examples" in out and "1 answers not at their offsets (skipped)" in out
    assert "dev: 7 examples" in out and "(scored on their texts)" in out

    _misplace(qa_files / "train.json", tmp_path / "train.json", {"q0", "q1"})  # 2 of 11: 18%
    with pytest.raises(OffsetError, match=r"train.json: 2 of 11 answered questions \(18%, more "
                       r"than 10%\).*answer_start \d+ holds .* is at \d+") as e:  # fmt: skip
        F.FinetuneData(qa_config(pretrained, tmp_path, total_steps=0))
    assert isinstance(e.value, DataError)  # the CLI's `error: ...` line, exit 2


def test_a_few_misplaced_answers_are_named_and_the_share_is_a_limit():
    def ex(i, start):
        given = 3 if start is None else start  # 3: past the end of "a b"
        return QAExample(f"f.json: data[{i}]", f"q{i}", "q?", "a b", ("b",), start, given)

    examples = [ex(i, None if i % 10 == 0 else 2) for i in range(40)]  # 4 of 40: exactly 10%
    kept, (note,) = training_examples(examples, "f.json")
    assert len(kept) == 36 and not any(e.answer_start is None for e in kept)
    assert note.count("(id ") == 3 and note.endswith("data[20] (id 'q20') ...")
    assert training_examples(examples[1:10], "f.json") == (examples[1:10], [])
    with pytest.raises(OffsetError, match="5 of 40 .* answer_start 3 holds '', 'b' is at 2"):
        training_examples([*examples[:-1], ex(39, None)], "f.json")

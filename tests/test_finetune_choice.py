"""Multiple choice (RACE format) end to end: reading JSONL / JSON / RACE directories with named
errors, the blank rule, one sequence per option with the article cut first, the option-scoring
head, masked padding options, training from a checkpoint (unshared from the command line:
tests/integration/test_finetune_cli.py), and the offline People's Daily choice dataset."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.choice import N_DEV, choice_config
from support.finetune import TOKENIZER, WORDS, tiny_config

from albert_jax.checkpoints import checkpoint
from albert_jax.data.finetuning.records import DataError
from albert_jax.experiments import datasets
from albert_jax.jobs import run as runs
from albert_jax.model.albert import init_params
from albert_jax.model.heads import build_model
from albert_jax.tasks import finetuning as F
from albert_jax.tasks.choice import (
    LETTERS,
    featurize_choice,
    fill_blank,
    num_choices,
    read_race,
)
from albert_jax.text.tokenization import load_tokenizer


# ---- reading ----------------------------------------------------------------------------------
def test_reads_jsonl_json_and_race_directories(race):
    train = read_race(race / "train.jsonl")
    assert len(train) == 18  # one example per question
    assert train[4].where == f"{race / 'train.jsonl'}:2: questions[1]" and train[4].qid == "t1-1"
    dev = read_race(race / "dev")  # sorted paths: high/0, high/1, middle/0, middle/1
    assert [e.qid for e in dev] == [
        "high0.txt-0", "high0.txt-1", "high1.txt-0",
        "middle0.txt-0", "middle0.txt-1", "middle0.txt-2", "middle1.txt-0",
    ]  # fmt: skip
    assert dev[3].where == f"{race / 'dev' / 'middle' / '0.txt'}: questions[0]"
    test = read_race(race / "test.json")
    raw = json.load(open(race / "test.json"))
    assert [e.label for e in test] == [LETTERS.index(a) for a in raw["answers"]]
    assert [list(e.options) for e in test] == raw["options"]


def test_blank_is_filled_with_the_option_else_appended():
    assert fill_blank("the _ is good", "hotel") == "the hotel is good"
    assert fill_blank("the ____ is _ .", "room") == "the room is room ."  # each blank, once
    assert fill_blank("which is clean?", "the room") == "which is clean? the room"
    assert fill_blank("", "room") == "room"
    assert fill_blank("a _ b", r"\1 x") == r"a \1 x b"  # option text is not a regex template


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_reader_errors_name_file_line_and_question(tmp_path):
    ok = {"article": "a b", "questions": ["q", "r"], "options": [list("abcd"), list("efgh")],
          "answers": ["A", "B"]}  # fmt: skip
    bad = _write(tmp_path / "bad.jsonl", json.dumps(ok) + '\n{"article": "x", \n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: malformed JSON"):
        read_race(bad)
    _write(tmp_path / "dir" / "high" / "1.txt", json.dumps(ok))
    _write(tmp_path / "dir" / "high" / "2.txt", '{\n "article": "a",\n "questions": [,\n}')
    with pytest.raises(DataError, match=r"dir/high/2.txt:3:\d+: malformed JSON"):
        read_race(tmp_path / "dir")
    missing = {k: v for k, v in ok.items() if k != "answers"}
    bad = _write(tmp_path / "missing.jsonl", "\n" + json.dumps(missing) + "\n")
    with pytest.raises(DataError, match=r"missing.jsonl:2: missing key 'answers'"):
        read_race(bad)
    bad = _write(tmp_path / "letter.json", json.dumps({**ok, "answers": ["A", "E"]}))
    with pytest.raises(
        DataError,
        match=r"letter.json: questions\[1\]: answer 'E' is not one of its 4 options \(A-D\)",
    ):
        read_race(bad)
    bad = _write(tmp_path / "count.json", json.dumps({**ok, "answers": ["A"]}))
    with pytest.raises(DataError, match=r"count.json: 2 questions, 2 option lists and 1 answers"):
        read_race(bad)
    bad = _write(tmp_path / "list.jsonl", "[1, 2]\n")
    with pytest.raises(DataError, match=r"list.jsonl:1: expected a JSON object, got list"):
        read_race(bad)


def test_option_counts_must_match_unless_num_choices_pads(tmp_path):
    rec = {"article": "a b", "questions": ["q", "r"], "options": [list("abcd"), list("abcde")],
           "answers": ["A", "E"]}  # fmt: skip
    examples = read_race(_write(tmp_path / "five.json", json.dumps(rec)))
    with pytest.raises(
        DataError, match=r"five.json: questions\[1\]: 5 options but 4 expected .*num_choices"
    ):
        num_choices({"train": examples})
    assert num_choices({"train": examples}, 5) == 5  # the first has 4: padded to 5
    with pytest.raises(DataError, match=r"questions\[1\]: 5 options but task.num_choices=4"):
        num_choices({"train": examples}, 4)
    # The count is the head's: a dev question that differs from train's is refused too.
    assert num_choices({"train": examples[:1], "dev": examples[:1]}) == 4
    with pytest.raises(DataError, match=r"5 options but 4 expected"):
        num_choices({"train": examples[:1], "dev": examples[1:]})


# ---- featurizing ------------------------------------------------------------------------------
def test_one_sequence_per_option_article_cut_first(tmp_path):
    tok = load_tokenizer(TOKENIZER)
    cls_id, sep_id = tok.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    long_article = " ".join(WORDS * 3)
    records = [
        {"article": long_article, "questions": ["the _ is good", "which is clean"],
         "options": [["hotel", "room", "staff"], ["nice", "bad", "dirty", "clean"]],
         "answers": ["B", "D"]},
        {"article": "the room", "questions": [" ".join(WORDS * 3)],
         "options": [["hotel", "room", "staff", "bad"]], "answers": ["A"]},
    ]  # fmt: skip
    path = _write(tmp_path / "x.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    examples = read_race(path)
    T = 32
    feats, stats = featurize_choice(examples, tok, T, 4)
    assert feats["input_ids"].shape == feats["attention_mask"].shape == (3, 4, T)
    assert feats["choice_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert feats["label"].tolist() == [1, 3, 0]
    article = tok.encode(long_article)
    for n, c in ((0, 1), (1, 3)):
        ex = examples[n]
        b = tok.encode(fill_blank(ex.question, ex.options[c]))  # kept whole: the article is cut
        want = [cls_id, *article[: T - 3 - len(b)], sep_id, *b, sep_id]
        assert feats["input_ids"][n, c].tolist() == want
        assert feats["token_type_ids"][n, c].tolist() == [0] * (T - len(b) - 1) + [1] * (len(b) + 1)
    assert tok.encode("the room is good") == tok.encode(fill_blank("the _ is good", "room"))
    # A padded option is [CLS] [SEP]; an over-long question+option keeps its end (the option).
    assert feats["input_ids"][0, 3, :3].tolist() == [cls_id, sep_id, 0]
    assert feats["attention_mask"][0, 3].sum() == 2
    qa = tok.encode(fill_blank(examples[2].question, "bad"))
    assert feats["input_ids"][2, 3].tolist() == [cls_id, sep_id, *qa[-(T - 3) :], sep_id]
    assert stats == {"examples": 3, "truncated": 3, "qa_truncated": 4, "padded_options": 1,
                     "longest_pieces": stats["longest_pieces"]}  # fmt: skip


# ---- the head and the task --------------------------------------------------------------------
def test_head_scores_each_option_as_its_own_sequence():
    config = tiny_config()
    model = build_model(config, {"type": "multiple_choice", "num_labels": 1})
    params = jax.jit(lambda: init_params(model, jax.random.key(0)))()
    assert params["classifier"]["kernel"].shape == (32, 1)  # AlbertForMultipleChoice's layout
    assert params["classifier"]["bias"].shape == (1,)
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(5, 120, (2, 3, 10)), jnp.int32)
    types = jnp.asarray(np.arange(10) >= 6, jnp.int32) * jnp.ones_like(ids)
    mask = jnp.asarray(np.arange(10) < 8, jnp.int32) * jnp.ones_like(ids)
    apply = jax.jit(lambda *inputs: model.apply({"params": params}, *inputs).logits)
    logits = apply(ids, types, mask)
    assert logits.shape == (2, 3)
    one = apply(ids[1, 2:3], types[1, 2:3], mask[1, 2:3])
    np.testing.assert_allclose(logits[1, 2], one[0], rtol=1e-5, atol=1e-6)


def test_padded_options_never_get_probability(pretrained, race):
    config = choice_config(pretrained, race)
    config.task.num_choices = 5  # every question gets at least one padded option
    data = F.FinetuneData(config, splits=("train", "dev"))
    task = F.make_task(config, data)
    assert task.head["num_choices"] == 5 and data.stats["dev"]["padded_options"] >= N_DEV
    feats = data.features["dev"]
    cm = feats["choice_mask"]
    # Padded options scored far above the real ones: still no probability, never chosen.
    logits = np.where(cm > 0, np.random.default_rng(0).normal(size=cm.shape), 100.0)
    rows, values = task.rows_and_metrics("dev", logits)
    for r, m in zip(rows, cm, strict=True):
        assert len(r["probabilities"]) == len(r["options"]) == m.sum()
        assert sum(r["probabilities"]) == pytest.approx(1, abs=1e-5)
        assert LETTERS.index(r["prediction"]) < len(r["options"])
    # The loss: cross-entropy over the real options only, no gradient to the padded ones.
    task.apply = lambda params, batch, rng: params["logits"]
    batch = {k: jnp.asarray(v) for k, v in feats.items()}
    loss, grad = jax.value_and_grad(
        lambda x: task.loss({"logits": x}, batch, task.normalizers(batch), None)[0]
    )(jnp.asarray(logits, jnp.float32))
    real = np.where(cm > 0, logits, -np.inf)
    logp = real - np.log(np.exp(real).sum(-1, keepdims=True))
    want = -np.mean(logp[np.arange(len(cm)), feats["label"]])
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert np.all(np.isfinite(grad)) and np.all(np.asarray(grad)[cm == 0] == 0)


def test_choice_trains_and_predicts_every_dev_question_once(pretrained, race, tmp_path):
    runs.run(choice_config(pretrained, race), str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    assert results["metric"] == "accuracy"
    dev = [json.loads(x) for x in open(tmp_path / "predictions" / "dev.jsonl")]
    assert [r["id"] for r in dev] == [e.qid for e in read_race(race / "dev")]
    assert len({r["id"] for r in dev}) == N_DEV
    acc = np.mean([r["prediction"] == r["answer"] for r in dev])
    assert results["dev"]["accuracy"] == pytest.approx(acc)
    for r in dev:  # 3-option questions: padded to 4, the padding gets no probability
        assert len(r["probabilities"]) == len(r["options"])
        assert sum(r["probabilities"]) == pytest.approx(1, abs=1e-5)
        # the predicted option has the highest probability, to the 6 decimals written (a 2-step
        # model's options can tie there)
        chosen = r["probabilities"][LETTERS.index(r["prediction"])]
        assert chosen == pytest.approx(max(r["probabilities"]), abs=2e-6)
        e = np.exp(np.array(r["logits"]) - max(r["logits"]))  # the real options' logits
        np.testing.assert_allclose(e / e.sum(), r["probabilities"], atol=2e-6)
    assert len(open(tmp_path / "predictions" / "test.jsonl").readlines()) == 3
    head = checkpoint.load_head(tmp_path / "best")
    assert head["type"] == "multiple_choice" and head["num_choices"] == 4
    _, params = checkpoint.load(tmp_path / "best")
    assert params["classifier"]["kernel"].shape == (32, 1)
    # `finetune.predict` on the best checkpoint reproduces the dev predictions.
    out = tmp_path / "again.jsonl"
    values = runs.predict_file(str(tmp_path / "best"), str(race / "dev"), str(out))
    again = [json.loads(x) for x in open(out)]
    assert [r["prediction"] for r in again] == [r["prediction"] for r in dev]
    np.testing.assert_allclose(
        [p for r in again for p in r["probabilities"]],
        [p for r in dev for p in r["probabilities"]],
        atol=1e-5,
    )
    assert values["accuracy"] == pytest.approx(acc)


# ---- the offline dataset ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def choice_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("choice_data") / "choice"
    return out, datasets.prepare("choice", out)


def test_choice_dataset_one_option_in_the_article(choice_data):
    out, stats = choice_data
    # Exact sizes pin the construction (MD5 splits and draws).
    assert {s: v["questions"] for s, v in stats["splits"].items()} == {
        "train": 4958,
        "dev": 550,
        "test": 576,
    }
    for split in datasets.SPLITS:
        examples = read_race(out / f"{split}.jsonl")
        assert len(examples) == stats["splits"][split]["questions"]
        assert num_choices({split: examples}) == 4
        for ex in examples:
            assert ex.question.count("_") == 1
            in_article = [o in ex.article for o in ex.options]
            assert in_article == [i == ex.label for i in range(4)], ex.where
        letters = stats["splits"][split]["answers"]
        assert sum(letters.values()) == len(examples) and min(letters.values()) > len(examples) / 6
    train = {e.article for e in read_race(out / "train.jsonl")}
    assert not train & {e.article for e in read_race(out / "dev.jsonl")}


@pytest.mark.slow
def test_choice_dataset_is_deterministic(choice_data, tmp_path):
    out, stats = choice_data
    assert datasets.prepare("choice", tmp_path / "again") == stats
    for file in sorted(os.listdir(out)):
        assert (out / file).read_bytes() == (tmp_path / "again" / file).read_bytes(), file

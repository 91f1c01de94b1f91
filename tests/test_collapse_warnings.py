"""The warning at every fine-tuning evaluation whose predictions collapsed (issue 27, point 4):
one line naming the split, the count, the prediction and the likely causes with the run's
values; `collapsed` among the metrics; silence on healthy predictions. QA also reports the
span-only scores and the always-no-answer floor beside the official ones."""

import json
import logging

import jax
import numpy as np
import pytest
from support.finetune import N_DEV, TOKENIZER, make_config, tiny_config
from support.relation import re_config
from support.seq2seq import s2s_config

from albert_jax.checkpoints import checkpoint
from albert_jax.configs.finetune.common import get_common
from albert_jax.jobs import run as runs
from albert_jax.model.albert import AlbertForPreTraining, init_params
from albert_jax.scoring import metrics as M
from albert_jax.tasks import finetuning as F
from albert_jax.tasks.choice import ChoiceTask
from albert_jax.tasks.qa import QATask
from albert_jax.tasks.relation import RelationTask
from albert_jax.tasks.seq2seq import Seq2SeqTask
from albert_jax.text.tokenization import load_tokenizer
from albert_jax.train.metrics import log_to_file

LOGGER = "albert_jax.tasks.finetuning"
CAUSES = (
    "likely causes: the learning rate (too low or too high: optim.learning_rate=0.001), too few "
    "steps (total_steps=6, 2 epochs) or the fresh head's learning-rate multiplier "
    "(optim.lr_multipliers=''; e.g. '^classifier/=10')"
)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A checkpoint with test_finetune's shapes and tokenizer; the model never runs here (the
    evaluations get planted outputs), so its weights are plain noise: no initialization to
    compile."""
    config = tiny_config()
    shapes = jax.eval_shape(lambda: init_params(AlbertForPreTraining(config), jax.random.key(0)))
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda x: rng.normal(0, 0.02, x.shape).astype(x.dtype), shapes)
    path = str(tmp_path_factory.mktemp("ckpt") / "model")
    checkpoint.save(path, config, params, tokenizer=load_tokenizer(TOKENIZER))
    return path


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def built(config, shape):
    """The task of `config` on the tiny model `shape`, built as a run builds it (no weights)."""
    config.model_from = shape
    return F.FinetuneTask.from_config(config, load_tokenizer(TOKENIZER))


# ---------------------------------------------------------------- the shared helper


def test_single_class_fires_with_the_gold_prior_and_varied_classes_stay_silent():
    golds = ["pos"] * 995 + ["neg"] * 721
    assert M.prediction_collapse(["pos"] * 1716, golds=golds) == (
        "every one of 1716 examples predicted 'pos' (the label prior: 58.0 % of the gold are 'pos')"
    )
    # A minority class: no "label prior".
    assert M.prediction_collapse(["neg"] * 1716, golds=golds).endswith(
        "predicted 'neg' (42.0 % of the gold are 'neg')"
    )
    assert M.prediction_collapse(golds, golds=golds) is None
    assert M.prediction_collapse(["pos"] * 1715 + ["neg"], golds=golds).startswith(
        "1715 of 1716 examples predicted 'pos'"
    )
    assert M.prediction_collapse(["pos"]) is None  # one example says nothing


def test_all_but_one_percent_is_collapsed_and_more_is_not():
    # The case: 720 of 721 test answers "" (7 others would still count; 8 would not).
    assert M.prediction_collapse([""] * 720 + ["x"]) == "720 of 721 examples predicted ''"
    assert M.prediction_collapse([""] * 714 + list("abcdefg")) is not None
    assert M.prediction_collapse([""] * 713 + list("abcdefgh")) is None
    assert M.prediction_collapse(["a"] * 99 + ["b"]) is not None  # 1 % of 100: one
    assert M.prediction_collapse(["a"] * 98 + ["b"]) is None  # under 100: every one must agree


def test_regression_without_spread_fires():
    golds = [0.0, 1.0, 2.0, 3.0]
    assert M.regression_collapse([1.5, 1.5, 1.5, 1.5], golds) == (
        "all 4 predictions are about 1.5 (std 0, the gold values' 1.12)"
    )
    assert M.regression_collapse([1.5, 1.5001, 1.5, 1.5], golds) is not None  # std 4e-5
    assert M.regression_collapse([1.0, 1.4, 1.6, 2.0], golds) is None
    assert M.regression_collapse([2.0, 2.0]) == "all 2 predictions are about 2 (std 0)"


HEAD = "^classifier/"


def test_the_warning_names_the_causes_with_the_run_values():
    c = get_common("classification")
    c.optim.learning_rate, c.total_steps = 2e-5, 300
    line = M.collapse_warning("dev", 100, "every one of 8 examples predicted 'pos'", c, HEAD)
    assert line == (
        "dev predictions collapsed at step 100: every one of 8 examples predicted 'pos'; likely "
        "causes: the learning rate (too low or too high: optim.learning_rate=2e-05), too few "
        "steps (total_steps=300) or the fresh head's learning-rate multiplier "
        "(optim.lr_multipliers=''; e.g. '^classifier/=10')"
    )
    c.optim.lr_multipliers = "^classifier/=10"
    line = M.collapse_warning("test", 7, "x", c, HEAD)
    assert "(optim.lr_multipliers='^classifier/=10')" in line and "e.g." not in line
    assert "multiplier" not in M.collapse_warning("dev", 7, "x", c, head=None)
    assert "\n" not in line
    c.steps_per_epoch, c.total_steps = 40, 100  # a resolved schedule: the epochs run
    assert "too few steps (total_steps=100, 2.5 epochs)" in M.collapse_warning("dev", 1, "x", c)
    c.total_steps = 0
    assert "too few steps (num_epochs=3)" in M.collapse_warning("dev", 1, "x", c)


# ---------------------------------------------------------------- classification and tagging,
# through `FinetuneTask.evaluate` with planted model outputs


def dev_golds(path, key):
    return [json.loads(line)[key] for line in open(path)]


def oracle(task, target):
    """A run that outputs the gold `target` of each dev row (found by its input ids)."""
    feats = task.data.features["dev"]
    gold = {tuple(x): y for x, y in zip(feats["input_ids"], feats[target], strict=True)}
    return lambda batch: np.stack([gold[tuple(x)] for x in np.asarray(batch["input_ids"])])


@pytest.fixture(scope="module")
def cls_task(pretrained, files):
    config = make_config(pretrained, "classification", files)
    config = runs.schedule(config, 24).record(config)
    return F.make_task(config, F.FinetuneData(config, splits=("train", "dev")))


@pytest.fixture(scope="module")
def tag_task(pretrained, files):
    config = make_config(pretrained, "tagging", files)
    config = runs.schedule(config, 24).record(config)
    return F.make_task(config, F.FinetuneData(config, splits=("train", "dev")))


def test_classification_collapse_warns_in_train_log(cls_task, files, caplog, tmp_path):
    task = cls_task
    assert task.data.labels == ["neg", "pos"]
    golds = dev_golds(files / "cls_dev.jsonl", "label")
    pos = golds.count("pos")
    assert 0 < pos < N_DEV
    prior = "the label prior: " if pos >= N_DEV - pos else ""
    expected = (
        f"dev predictions collapsed at step 7: every one of {N_DEV} examples predicted 'pos' "
        f"({prior}{100 * pos / N_DEV:.1f} % of the gold are 'pos'); {CAUSES}"
    )
    log_path = log_to_file(str(tmp_path))  # as `train` does: the file handler on the root logger
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            values = task.evaluate(lambda b: np.tile([0.0, 1.0], (len(b["input_ids"]), 1)), 7)
    finally:
        root = logging.getLogger()
        for h in [h for h in root.handlers if getattr(h, "baseFilename", None) == log_path]:
            root.removeHandler(h)
            h.close()
    assert warnings_of(caplog) == [expected]
    assert values["collapsed"] == 1.0 and values["accuracy"] == pytest.approx(pos / N_DEV)
    assert expected in open(log_path).read()


def test_classification_healthy_predictions_stay_silent(cls_task, files, caplog):
    task = cls_task
    labels = oracle(task, "label")

    def run(batch):  # the gold class's logit highest
        return np.eye(2, dtype=np.float32)[labels(batch)]

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        values = task.evaluate(run, 7)
    assert warnings_of(caplog) == []
    assert values["collapsed"] == 0.0 and values["accuracy"] == 1.0


def test_tagging_all_O_warns_and_healthy_tags_stay_silent(tag_task, files, caplog):
    task = tag_task
    labels = task.data.labels
    words = [w for s in open(files / "tag_dev.conll").read().split("\n\n") for w in s.split("\n")]
    tags = [w.split("\t")[1] for w in words if w]
    share = 100 * tags.count("O") / len(tags)
    assert 0 < tags.count("B-X") < len(tags)
    T = task.data.max_seq_length

    def all_o(batch):
        return np.full((len(batch["input_ids"]), T), labels.index("O"), np.int32)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        values = task.evaluate(all_o, 3)
    assert warnings_of(caplog) == [
        f"dev predictions collapsed at step 3: every one of {len(tags)} words ({N_DEV} sentences) "
        f"predicted 'O' (the label prior: {share:.1f} % of the gold are 'O'); {CAUSES}"
    ]
    assert values["collapsed"] == 1.0 and values["f1"] == 0.0

    caplog.clear()
    gold = oracle(task, "labels")  # -100 (not scored) off the words' first pieces

    def run(batch):
        return np.maximum(gold(batch), 0).astype(np.int32)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        values = task.evaluate(run, 3)
    assert warnings_of(caplog) == []
    # Not 1: words past max_seq_length (16 pieces) are predicted "O".
    assert values["collapsed"] == 0.0 and values["precision"] == 1.0 and values["f1"] > 0


# ---------------------------------------------------------------- extractive QA


QA = [  # (context, answer or None): single-window contexts of fixture-vocabulary words
    ("the hotel is good", "good"),
    ("the room is dirty", "room"),
    ("the staff is nice", "staff is nice"),
    ("bad room", None),
]


@pytest.fixture(scope="module")
def qa_task(pretrained, tmp_path_factory):
    from helpers import split_files_config

    d = tmp_path_factory.mktemp("qa_collapse")
    data = []
    for i, (ctx, answer) in enumerate(QA):
        qa = {"id": f"q{i}", "question": "where is it", "is_impossible": answer is None}
        qa["answers"] = [{"text": answer, "answer_start": ctx.index(answer)}] if answer else []
        data.append({"title": str(i), "paragraphs": [{"context": ctx, "qas": [qa]}]})
    for split in ("train", "dev", "test"):
        (d / f"{split}.json").write_text(json.dumps({"version": "v2.0", "data": data}))
    task = dict(max_seq_length=32, doc_stride=8, max_query_length=8, max_answer_length=16,
                n_best=5, char_level=False)  # fmt: skip
    config = split_files_config("qa", pretrained, d, "json", 6, task)
    config = runs.schedule(config, 4).record(config)
    return F.make_task(config, F.FinetuneData(config, splits=("train", "test")))


def planted_qa_logits(feats):
    """Every window (one a question): [CLS] at 10 + 10 (null score 20) and the first word of the
    gold answer (unanswerable: of the context) at 5 + 5, so that word is the best span and
    null_score_diff is 10."""
    n, T = feats["input_ids"].shape
    logits = np.zeros((n, T, 2), np.float32)
    logits[:, 0] = 10.0
    for i in range(n):
        offsets = feats["offsets"][i]
        s = int(feats["start_positions"][i]) or int(np.flatnonzero(offsets[:, 0] >= 0)[0])
        e = int(np.flatnonzero((offsets == offsets[s]).all(1))[-1])  # the word's last piece
        logits[i, s, 0] = logits[i, e, 1] = 5.0
    return logits


def evaluated(task, split, step, predictions):
    """(rows, metrics) of an evaluation at `step`: scored, checked (the warning), the rows."""
    values = task.score(split, predictions)
    task.check(split, step, predictions, values)
    return task.rows(split, predictions), values


def test_qa_all_no_answer_warns_with_span_only_scores_and_the_floor(qa_task, caplog):
    task = qa_task
    feats = task.data.features["test"]
    assert len(feats["input_ids"]) == len(QA)  # one window a question
    logits = planted_qa_logits(feats)
    # By hand: 3 answerable questions, 1 not. A threshold under every null_score_diff (10)
    # answers "" everywhere: official F1 = EM = 1/4 (the unanswerable one), the same as always
    # answering "". The best spans alone: "good" and "room" right, "staff" against "staff is
    # nice" F1 2 * 1 * (1/3) / (1 + 1/3) = 0.5 and no exact match, "bad" wrong: F1 (1 + 1 + 0.5
    # + 0) / 4 = 62.5 %, EM 2 / 4 = 50 %.
    task.null_threshold = 0.0  # as tuned on dev; the test split keeps it
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rows, values = evaluated(task, "test", 3, logits)
    assert [r["prediction"] for r in rows] == [""] * 4
    assert [r["nbest"][0]["text"] for r in rows] == ["good", "room", "staff", "bad"]
    assert values["f1"] == values["exact"] == 25.0
    assert values["span_f1"] == 62.5 and values["span_exact"] == 50.0
    assert values["no_answer_floor"] == 25.0 and values["collapsed"] == 1.0
    keys = list(values)  # the figures sit beside the official ones in the eval line
    assert keys[keys.index("f1") + 1 : keys.index("f1") + 4] == [
        "span_exact", "span_f1", "no_answer_floor",
    ]  # fmt: skip
    (line,) = warnings_of(caplog)
    assert line.startswith(
        "test predictions collapsed at step 3: every one of 4 questions answered '' (no answer) "
        "(official f1 25.0, span-only f1 62.5, always-no-answer floor 25.0); likely causes: "
        "the learning rate (too low or too high: optim.learning_rate=0.001)"
    )

    caplog.clear()
    task.null_threshold = 100.0  # never "no answer": four different answers
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rows, values = evaluated(task, "test", 3, logits)
    assert warnings_of(caplog) == []
    assert values["f1"] == values["span_f1"] == 62.5 and values["collapsed"] == 0.0


def test_qa_one_identical_span_fires():
    rows = [{"prediction": "the hotel"}] * 5
    assert QATask.collapse(None, rows, {}) == (
        "every one of 5 questions answered the same span 'the hotel'"
    )
    assert QATask.collapse(None, [{"prediction": t} for t in ("a", "b", "")], {}) is None


# ---------------------------------------------------------------- choice, relations, seq2seq


def test_choice_one_option_always_fires():
    golds = "ABCDABCDAB"
    rows = [{"answer": a, "prediction": "A"} for a in golds]
    line = M.collapse_warning(
        "dev", 4, ChoiceTask.collapse(None, rows, {}), get_common("multiple_choice")
    )
    assert line.startswith(
        "dev predictions collapsed at step 4: every one of 10 questions chose option 'A' "
        "(the label prior: 30.0 % of the gold are 'A'); likely causes:"
    )
    rows = [{"answer": a, "prediction": a} for a in golds]
    assert ChoiceTask.collapse(None, rows, {}) is None


def test_relations_without_any_triple_fire(caplog, re_files, model_from):
    task = built(re_config("", re_files), model_from)
    assert isinstance(task, RelationTask)
    task.rows_and_metrics = lambda name, planted: planted  # (rows, metrics) as decoded
    one = [{"subject": "a", "predicate": "p", "object": "b"}]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _, values = evaluated(task, "dev", 2, ([{"predicted": []}] * 6, {"f1": 0.0}))
    (line,) = warnings_of(caplog)
    assert line.startswith("dev predictions collapsed at step 2: no triple predicted for any "
                           "of 6 sentences; likely causes:")  # fmt: skip
    assert values == {"f1": 0.0, "collapsed": 1.0}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rows = [{"predicted": []}] * 5 + [{"predicted": one}]
        _, values = evaluated(task, "dev", 2, (rows, {"f1": 0.1}))
    assert warnings_of(caplog) == [] and values["collapsed"] == 0.0


def test_seq2seq_empty_or_identical_generations_fire_through_evaluate(
    caplog,
    s2s_files,
    model_from,
):
    task = built(s2s_config("", s2s_files), model_from)
    assert isinstance(task, Seq2SeqTask)
    for texts, what in (
        ([""] * 4, "every one of 4 generations came out empty"),
        (["天气"] * 4, "every one of 4 generations came out as the same text '天气'"),
        (["天气", "好", "", "天气"], None),
    ):
        task.predict = lambda run, name, t=texts: t
        task.rows_and_metrics = lambda name, t: ([{"prediction": x} for x in t], {"f1": 1.0})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            values = task.evaluate(None, 5)
        if what is None:
            assert warnings_of(caplog) == [] and values["collapsed"] == 0.0
            continue
        (line,) = warnings_of(caplog)
        assert line.startswith(f"dev predictions collapsed at step 5: {what}; likely causes:")
        assert "multiplier" not in line and values["collapsed"] == 1.0  # no fresh head there

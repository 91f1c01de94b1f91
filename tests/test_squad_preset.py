"""SQuAD presets (configs/finetune/squad.py) on tiny files named as SQuAD's site serves them:
a step of training, dev scored with the official script's rules (recomputed here with
albert_jax.scoring.squad from the written predictions.json) and predictions.json as the
official script and CodaLab take it."""

import json

import pytest
from support.clue import write_squad
from support.finetune import read_jsonl

from albert_jax.configs.finetune import squad
from albert_jax.jobs import run as runs
from albert_jax.scoring import squad as official


def tiny(version, data_dir, init, **kw):
    c = squad.get_config(version)
    c.init = init
    c.task.data_dir = str(data_dir)
    flat = {"batch_size": 8, "eval_batch_size": 8, "total_steps": 1, "log_every": 1,
            "progress_bar": False, "task.max_seq_length": 24, "task.doc_stride": 6,
            "task.max_query_length": 6, "task.max_answer_length": 4,
            "optim.learning_rate": 1e-3}  # fmt: skip
    c.update_from_flattened_dict({**flat, **kw})
    return c


@pytest.mark.parametrize("version", ["v1", pytest.param("v2", marks=pytest.mark.slow)])
def test_squad_trains_and_writes_predictions_json_scored_as_the_official_script(
    version, pretrained, tmp_path
):
    data = tmp_path / "squad"
    data.mkdir()
    write_squad(data, squad.VERSIONS[version])
    runs.run(tiny(version, data, pretrained), str(tmp_path / "run"))
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    predictions = json.loads((tmp_path / "run" / "submission" / "predictions.json").read_text())
    dev = json.loads((data / f"dev-{squad.VERSIONS[version]}.json").read_text())
    golds = {
        qa["id"]: [a["text"] for a in qa["answers"]]
        for article in dev["data"]
        for para in article["paragraphs"]
        for qa in para["qas"]
    }
    assert list(predictions) == list(golds)
    assert all(isinstance(v, str) for v in predictions.values())
    # the official script's F1 and EM of predictions.json (words: no na_probs, the threshold
    # already applied to v2.0's answers), the run's own
    scores = official.squad_evaluate(golds, predictions, char_level=False)
    assert results["dev"]["f1"] == pytest.approx(scores["f1"], abs=1e-6)
    assert results["dev"]["exact"] == pytest.approx(scores["exact"], abs=1e-6)
    assert results["metric"] == "f1"
    rows = read_jsonl(tmp_path / "run" / "predictions" / "dev.jsonl")
    assert predictions == {r["id"]: r["prediction"] for r in rows}
    assert not (tmp_path / "run" / "predictions" / "test.jsonl").exists()  # no test set


def test_table_14_is_the_starting_point():
    v1 = squad.get_config("v1")
    assert (v1.optim.learning_rate, v1.batch_size, v1.total_steps) == (5e-5, 48, 3649)
    assert round(v1.warmup_fraction * v1.total_steps) == 365 and v1.task.max_seq_length == 384
    assert v1.model.hidden_dropout == v1.model.attention_dropout == 0.0
    assert v1.model.classifier_dropout == 0.1 and not v1.task.char_level
    assert (v1.task.doc_stride, v1.task.max_query_length) == (128, 64)
    assert (v1.task.max_answer_length, v1.task.n_best) == (30, 20)
    assert (v1.task.train, v1.task.dev, v1.task.test) == ("train-v1.1.json", "dev-v1.1.json", "")
    v2 = squad.get_config("v2")
    assert (v2.optim.learning_rate, v2.total_steps, v2.task.max_seq_length) == (3e-5, 8144, 512)
    assert round(v2.warmup_fraction * v2.total_steps) == 814
    with pytest.raises(ValueError, match="squad.py:TASK"):
        squad.get_config("v2.0")  # a config argument cannot hold a dot: `squad.py:v2`

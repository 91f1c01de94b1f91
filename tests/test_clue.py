"""CLUE presets (configs/finetune/clue.py) on a tiny download in the official files' layouts:
each classification task reads its JSON lines as CLUE ships them (CSL's keywords and
CLUEWSC2020's spans by their own readers, CMNLI / OCNLI's '-' rows left out), trains a step,
scores dev with accuracy (recomputed here with scikit-learn from the written predictions) and
writes CLUE's submission file, one `{"id", "label"}` row per test example; CMRC 2018's test set,
which has no answers, is predicted into cmrc2018_predict.json."""

import dataclasses
import json

import pytest
from sklearn.metrics import accuracy_score
from support.clue import DASH_EVERY, FOLDERS, TEST_ID, N, write_clue
from support.finetune import read_jsonl

from albert_jax.configs.finetune import clue
from albert_jax.data.finetuning import benchmarks
from albert_jax.data.finetuning.records import DataError, Example
from albert_jax.jobs import run as runs
from albert_jax.scoring import squad
from albert_jax.tasks.finetune_config import ClassificationSettings, QASettings
from albert_jax.tasks.qa import QAReader, read_squad

CLASSIFICATION = sorted(t for t in clue.TASKS if t != "cmrc2018")
DEFAULT = ("wsc",)  # a reader of its own and a 1.0 test file; the rest in the slow tier


@pytest.fixture(scope="module")
def clue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("clue_data")
    return root, write_clue(root)


def tiny(task, data_dir, init, **kw):
    c = clue.get_config(task)
    c.init = init
    c.task.data_dir = str(data_dir)
    flat = {"batch_size": 8, "eval_batch_size": 8, "total_steps": 1, "log_every": 1,
            "progress_bar": False, "task.max_seq_length": 16, "optim.learning_rate": 1e-3,
            "lr_search.enabled": False}  # fmt: skip
    if task == "cmrc2018":
        flat.update({"task.max_seq_length": 24, "task.doc_stride": 6,
                     "task.max_query_length": 6, "task.max_answer_length": 4})  # fmt: skip
    c.update_from_flattened_dict({**flat, **kw})
    return c


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_submission(path, ids, labels):
    rows = read_lines(path)
    assert [sorted(r) for r in rows] == [["id", "label"]] * len(ids)
    assert [r["id"] for r in rows] == ids
    assert all(r["label"] in labels for r in rows)
    return rows


@pytest.mark.parametrize(
    "task",
    [t if t in DEFAULT else pytest.param(t, marks=pytest.mark.slow) for t in CLASSIFICATION],
)
def test_each_clue_task_reads_its_files_scores_dev_and_writes_its_submission(
    task, clue_dir, pretrained, tmp_path
):
    root, made = clue_dir
    runs.run(tiny(task, root, pretrained), str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    dashes = sum(1 for i in range(N["dev"]) if i % DASH_EVERY == 3)
    assert len(dev) == N["dev"] - (dashes if task in ("cmnli", "ocnli") else 0)
    assert all(r["label"] != "-" for r in dev)
    y, p = [r["label"] for r in dev], [r["prediction"] for r in dev]
    assert results["dev"]["accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-9)
    assert results["metric"] == "accuracy"
    labels = clue.TASKS[task][3].split(",")
    bench = benchmarks.get(f"clue/{task}")
    name = bench.submission("test.json")
    assert sorted(p.name for p in (tmp_path / "submission").iterdir()) == [name]
    check_submission(tmp_path / "submission" / name, made[task]["test.json"], labels)
    if "test1.0.json" in made[task]:  # CLUE 1.0's test set: its own file, from finetune.predict
        test10 = root / FOLDERS[task] / "test1.0.json"
        out = runs.predict_file(str(tmp_path / "best"), str(test10), str(tmp_path / "t10.jsonl"))
        assert out["submission"].endswith(bench.submission("test1.0.json"))
        check_submission(tmp_path / bench.submission("test1.0.json"),
                         made[task]["test1.0.json"], labels)  # fmt: skip


def test_cmrc2018_predicts_its_test_split_without_answers(clue_dir, pretrained, tmp_path):
    root, made = clue_dir
    runs.run(tiny("cmrc2018", root, pretrained), str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    # dev scored as CMRC scores it (F1 over characters), recomputed from the written predictions
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    golds = {r["id"]: r["answers"] for r in dev}
    preds = {r["id"]: r["prediction"] for r in dev}
    official = squad.squad_evaluate(golds, preds, char_level=True)
    assert results["dev"]["f1"] == pytest.approx(official["f1"], abs=1e-6)
    assert results["dev"]["exact"] == pytest.approx(official["exact"], abs=1e-6)
    # test: no answers, so predicted and submitted, not scored
    test = read_jsonl(tmp_path / "predictions" / "test.jsonl")
    assert [r["id"] for r in test] == made["cmrc2018"]["test.json"]
    assert all(r["answers"] is None for r in test)
    assert not results.get("test")
    sub = json.loads((tmp_path / "submission" / "cmrc2018_predict.json").read_text())
    assert list(sub) == made["cmrc2018"]["test.json"]
    assert all(isinstance(v, str) for v in sub.values())
    assert sub == {r["id"]: r["prediction"] for r in test}


def settings(task, **kw):
    c = clue.get_config(task)
    kind = QASettings if task == "cmrc2018" else ClassificationSettings
    return dataclasses.replace(kind.from_config(c.task), **kw)


def test_csl_reads_keywords_and_abstract_as_clue_s_baseline(tmp_path):
    f = tmp_path / "train.json"
    recs = [
        {"id": 5, "abst": "the hotel is good", "keyword": ["room", "clean staff"], "label": "1"},
        {"id": 6, "abst": "bad room", "keyword": ["dirty"], "label": "0"},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    examples = benchmarks.read_csl(f, settings("csl"))
    assert examples == [
        Example("train.json:1", "room clean staff", "the hotel is good", "1", 5),
        Example("train.json:2", "dirty", "bad room", "0", 6),
    ]
    f.write_text(json.dumps(recs[0]) + "\n" + json.dumps({**recs[1], "keyword": "dirty"}) + "\n")
    with pytest.raises(DataError, match=r"train.json:2: 'keyword' must be a non-empty list"):
        benchmarks.read_csl(f, settings("csl"))
    f.write_text(json.dumps({"id": 1, "keyword": ["a"], "label": "1"}) + "\n")
    with pytest.raises(DataError, match=r"train.json:1: missing column\(s\) \['abst'\]"):
        benchmarks.read_csl(f, settings("csl"))


def test_wsc_marks_the_noun_and_the_pronoun_as_clue_s_baseline(tmp_path):
    text = "这时候放在床上枕头旁边的手机响了，我感到奇怪，因为欠费已被停机两个月，现在它突然响了。"
    target = {"span2_index": 37, "span1_index": 5, "span1_text": "床", "span2_text": "它"}
    rec = {"target": target, "idx": 261, "label": "false", "text": text}
    marked, none = benchmarks.wsc_text(rec, "x")
    assert none is None
    assert marked == text[:5] + "_床_" + text[6:37] + "[它]" + text[38:]
    # the pronoun first: marked the same way, wherever it stands
    rec2 = {"target": {"span1_index": 3, "span1_text": "hotel", "span2_index": 0,
                       "span2_text": "it"}, "text": "it hotel"}  # fmt: skip
    assert benchmarks.wsc_text(rec2, "x")[0] == "[it] _hotel_"
    f = tmp_path / "dev.json"
    bad = {**rec, "target": {**target, "span2_index": 36}}
    f.write_text(json.dumps(rec, ensure_ascii=False) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"dev.json:2: target span2_text '它' is not at "
                                        r"span2_index 36 of the text \(it is at 37\)"):  # fmt: skip
        benchmarks.read_wsc(f, settings("wsc"))
    f.write_text(json.dumps({"text": text, "label": "true"}) + "\n")
    with pytest.raises(DataError, match=r"dev.json:1: missing column\(s\) \['target'\]"):
        benchmarks.read_wsc(f, settings("wsc"))


def test_nli_skips_dash_rows_and_a_test_row_without_an_id_gets_its_row_number(tmp_path):
    f = tmp_path / "dev.json"
    rows = [{"sentence1": "a b", "sentence2": "c", "label": lab} for lab in ("neutral", "-", "-")]
    rows.append({"sentence1": "a", "sentence2": "d", "label": "entailment"})
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = benchmarks.read_clue(f, settings("cmnli"))
    assert [(e.where, e.label) for e in examples] == [
        ("dev.json:1", "neutral"), ("dev.json:4", "entailment")
    ]  # fmt: skip
    t = tmp_path / "test.json"
    t.write_text('{"sentence1": "a", "sentence2": "b"}\n{"sentence1": "c", "sentence2": "d"}\n')
    assert [e.id for e in benchmarks.read_clue(t, settings("cmnli"))] == [0, 1]
    t.write_text('{"id": 7, "sentence1": "a", "sentence2": "b"}\n')
    assert [e.id for e in benchmarks.read_clue(t, settings("cmnli"))] == [7]


def test_a_squad_file_without_answers_is_one_to_predict(tmp_path):
    def write(*qas):
        doc = {"data": [{"paragraphs": [{"context": "the hotel is good", "qas": list(qas)}]}]}
        (tmp_path / "f.json").write_text(json.dumps(doc))
        return str(tmp_path / "f.json")

    bare = write({"id": "a", "question": "where"}, {"id": "b", "question": "what", "answers": []})
    examples, _ = read_squad(bare)
    assert [e.answers for e in examples] == [None, None]
    with pytest.raises(DataError, match=r"qas\[0\]: no answers and not is_impossible"):
        QAReader(settings("cmrc2018", train=bare)).check_targets(examples)
    answer = {"text": "hotel", "answer_start": 4}
    mixed = write({"id": "a", "question": "where"}, {"id": "b", "question": "what",
                                                    "answers": [answer]})  # fmt: skip
    with pytest.raises(DataError, match=r"qas\[0\]: no answers and not is_impossible"):
        read_squad(mixed)


def test_the_presets_are_clue_s_baselines():
    afqmc = clue.get_config("afqmc")
    assert (afqmc.optim.learning_rate, afqmc.batch_size, afqmc.num_epochs) == (3e-5, 16, 2.0)
    assert afqmc.task.max_seq_length == 128 and afqmc.task.id == "id"
    assert afqmc.task.benchmark == "clue/afqmc"
    assert len(clue.get_config("tnews").task.labels) == 15
    assert len(clue.get_config("iflytek").task.labels) == 119
    assert clue.get_config("cmnli").task.skip_labels == ("-",)
    ocnli = clue.get_config("ocnli")  # no ALBERT baseline: searched on dev
    assert ocnli.optim.learning_rate is None and ocnli.lr_search.enabled
    cmrc = clue.get_config("cmrc2018")
    assert cmrc.task.type == "qa" and cmrc.task.char_level and cmrc.task.max_seq_length == 512
    assert benchmarks.get("clue/cmrc2018").submission("test.json") == "cmrc2018_predict.json"
    assert benchmarks.FORMATS["qa"]([{"id": "q", "prediction": "床"}]) == '{"q": "床"}\n'
    with pytest.raises(ValueError, match="clue.py:TASK"):
        clue.get_config("cluewsc2020")
    assert TEST_ID > N["test"]  # the fixture's test ids are not row numbers


def test_a_missing_file_names_the_data_dir_it_was_looked_for_under(tmp_path):
    from albert_jax.jobs.start import check_files
    from albert_jax.tasks.finetune_config import FinetuneError

    c = clue.get_config("afqmc")
    c.task.data_dir = str(tmp_path)
    with pytest.raises(FinetuneError, match=r"afqmc_public/train.json does not exist .*"
                                            r"DIR/afqmc_public/train.json here"):  # fmt: skip
        check_files(c)

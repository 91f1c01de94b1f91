"""GLUE presets (configs/finetune/glue.py) on a tiny distribution in the official files' layouts:
each task reads its files as GLUE ships them, trains a step, scores dev with the benchmark's
metric (recomputed here with scikit-learn / SciPy from the written predictions) and writes the
GLUE server's submission file, one row per test example; `finetune.predict` writes it too."""

import json

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score, matthews_corrcoef
from support.finetune import read_jsonl
from support.glue import FOLDERS, N, write_glue

from albert_jax.configs.finetune import glue
from albert_jax.data.finetuning import benchmarks
from albert_jax.data.finetuning.records import DataError, read_examples
from albert_jax.jobs import run as runs


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    return root, write_glue(root)


def tiny(task, data_dir, init, **kw):
    c = glue.get_config(task)
    c.init = init
    c.task.data_dir = str(data_dir)
    flat = {"batch_size": 8, "eval_batch_size": 8, "total_steps": 2, "log_every": 1,
            "progress_bar": False, "task.max_seq_length": 16, "optim.learning_rate": 1e-3,
            "lr_search.enabled": False}  # fmt: skip
    c.update_from_flattened_dict({**flat, **kw})
    return c


def read_submission(path):
    lines = path.read_text().splitlines()
    return lines[0], [line.split("\t") for line in lines[1:]]


# headerless files, Matthews; regression; two dev and test sets: in the default suite, the rest
# (the same reader on other columns) in the slow tier
DEFAULT = ("cola", "stsb", "mnli")


@pytest.mark.parametrize(
    "task",
    [t if t in DEFAULT else pytest.param(t, marks=pytest.mark.slow) for t in sorted(FOLDERS)],
)
def test_each_glue_task_reads_its_files_scores_dev_and_writes_its_submission(
    task, glue_dir, pretrained, tmp_path
):
    root, made = glue_dir
    runs.run(tiny(task, root, pretrained), str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    assert len(dev) == N["dev"]
    labels = glue.TASKS[task][6].split(",")
    if task == "stsb":  # Pearson and Spearman, as GLUE scores STS-B
        y, p = [r["label"] for r in dev], [r["prediction"] for r in dev]
        assert results["dev"]["pearson"] == pytest.approx(stats.pearsonr(y, p)[0], abs=1e-6)
        assert results["dev"]["spearman"] == pytest.approx(stats.spearmanr(y, p)[0], abs=1e-6)
    else:
        y, p = [r["label"] for r in dev], [r["prediction"] for r in dev]
        assert results["dev"]["accuracy"] == pytest.approx(np.mean(np.equal(y, p)))
        assert results["dev"]["mcc"] == pytest.approx(matthews_corrcoef(y, p), abs=1e-9)
        if task in ("mrpc", "qqp"):  # F1 of the paraphrase class
            f1 = f1_score(y, p, pos_label="1", zero_division=0)
            assert results["dev"]["f1"] == pytest.approx(f1, abs=1e-9)
    assert results["metric"] == {"cola": "mcc", "stsb": "pearson"}.get(task, "accuracy")
    # one submission file per test set, GLUE's name, header and one row per test example
    for name, indices in made[task].items():
        sub = tmp_path / "submission" / benchmarks.get(f"glue/{task}").submission(name)
        header, rows = read_submission(sub)
        assert header == "index\tprediction"
        assert [r[0] for r in rows] == indices
        for _, pred in rows:
            if task == "stsb":
                float(pred)
            else:
                assert pred in labels
    if task == "qqp":  # the malformed train row is left out, all the others read
        config = tiny(task, root, pretrained)
        from albert_jax.tasks.finetuning import FinetuneData

        counts = FinetuneData(config).stats["train"]
        assert counts["bad_rows_skipped"] == 1 and counts["examples"] == N["train"]
    if task == "mnli":  # the mismatched dev set, scored at the end
        assert set(results["dev_mismatched"]) >= {"accuracy", "mcc"}
        assert len(read_jsonl(tmp_path / "predictions" / "dev_mismatched.jsonl")) == N["dev"]
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert "accuracy" in summary["dev_mismatched"]
        assert sorted(p.name for p in (tmp_path / "submission").iterdir()) == [
            "MNLI-m.tsv", "MNLI-mm.tsv"
        ]  # fmt: skip


def test_predict_writes_the_submission_of_a_test_file(glue_dir, pretrained, tmp_path):
    from albert_jax.finetune import predict

    root, made = glue_dir
    runs.run(tiny("cola", root, pretrained), str(tmp_path / "run"))
    out = tmp_path / "out" / "test.jsonl"
    out.parent.mkdir()
    test = root / "CoLA" / "test.tsv"
    assert predict.main(["--checkpoint", str(tmp_path / "run" / "best"), "--input", str(test),
                         "--output", str(out)]) == 0  # fmt: skip
    header, rows = read_submission(tmp_path / "out" / "CoLA.tsv")
    assert header == "index\tprediction" and [r[0] for r in rows] == made["cola"]["test.tsv"]
    # the same predictions as the run's own submission file, from the same best parameters
    assert rows == read_submission(tmp_path / "run" / "submission" / "CoLA.tsv")[1]
    # a dev file is scored (with its labels, headerless as shipped) and makes no submission
    values = runs.predict_file(
        str(tmp_path / "run" / "best"), str(root / "CoLA" / "dev.tsv"), str(tmp_path / "d.jsonl")
    )
    assert "mcc" in values and "submission" not in values


def test_cola_reads_headerless_files_and_a_test_file_with_its_header(glue_dir):
    root, _ = glue_dir
    kw = dict(text_a="sentence", label="label", id="index", columns=glue.COLA_COLUMNS.split(","))
    train = read_examples(root / "CoLA" / "train.tsv", **kw)
    assert len(train) == N["train"] and train[0].where.endswith(":1")  # line 1 is data
    assert {e.label for e in train} <= {"0", "1"} and train[0].id is None
    test = read_examples(root / "CoLA" / "test.tsv", **kw)
    assert [e.id for e in test] == [str(i) for i in range(N["test"])] and test[0].label is None


def test_bad_glue_input_names_the_file_line_or_setting(glue_dir, pretrained, tmp_path):
    root, _ = glue_dir
    bad = tmp_path / "CoLA"
    bad.mkdir()
    lines = (root / "CoLA" / "train.tsv").read_text().splitlines()
    (bad / "train.tsv").write_text("\n".join(lines[:3] + ["gj04\t1\tonly three"]) + "\n")
    with pytest.raises(DataError, match=r"train.tsv:4: 3 fields but the header has 4"):
        read_examples(bad / "train.tsv", text_a="sentence", columns=glue.COLA_COLUMNS.split(","))
    # a test file without its index column: no submission could be written, so no run starts
    (bad / "dev.tsv").write_text((root / "CoLA" / "dev.tsv").read_text())
    (bad / "test.tsv").write_text("sentence\nthe hotel is good\n")
    (bad / "train.tsv").write_text((root / "CoLA" / "train.tsv").read_text())
    with pytest.raises(DataError, match=r"test.tsv:2: no id \(column 'index'\)"):
        runs.run(tiny("cola", tmp_path, pretrained), str(tmp_path / "run"))
    # QQP's malformed row is an error to a reader not told to skip it, naming its line
    with pytest.raises(DataError, match=r"train.tsv:5: 3 fields but the header has 6"):
        read_examples(root / "QQP" / "train.tsv", text_a="question1", text_b="question2")
    with pytest.raises(DataError, match="task.benchmark='glue/nope': unknown"):
        benchmarks.get("glue/nope")
    with pytest.raises(ValueError, match="glue.py:TASK"):
        glue.get_config("mnli-m")


def test_table_14_is_the_starting_point():
    c = glue.get_config("rte")
    assert (c.optim.learning_rate, c.batch_size, c.total_steps) == (3e-5, 32, 800)
    assert round(c.warmup_fraction * c.total_steps) == 200
    assert c.model.hidden_dropout == c.model.attention_dropout == 0.1
    assert c.model.classifier_dropout == 0.1 and c.task.max_seq_length == 512
    wnli = glue.get_config("wnli")  # not in the table: searched on dev
    assert wnli.optim.learning_rate is None and wnli.lr_search.enabled


def test_binary_f1_is_the_positive_class_and_matthews_sklearns():
    from albert_jax.scoring.metrics import classification_metrics

    rng = np.random.default_rng(3)
    y, p = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    p[:40] = y[:40]  # some agreement, unequal classes
    for positive in (0, 1):
        got = classification_metrics(y, p, positive)
        assert got["f1"] == pytest.approx(f1_score(y, p, pos_label=positive), abs=1e-12)
        assert got["mcc"] == pytest.approx(matthews_corrcoef(y, p), abs=1e-12)
    assert "f1" not in classification_metrics(y, p)  # only for a task with a positive class

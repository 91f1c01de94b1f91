"""Fine-tuning as a user types it: `python -m finetune` from a checkpoint, unshared, for each
task type (then `finetune.predict` and the Python API on what it wrote), with the learning-rate
search, and `python -m finetune.compare` on finished runs. The fixtures are tests/conftest.py's."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from support import ROOT, choice
from support.finetune import read_jsonl, write_run

from albert_jax.checkpoints import checkpoint
from albert_jax.finetune import compare
from albert_jax.jobs import run as runs


def test_cli_unshared_from_shared_checkpoint_then_python_api(pretrained, files, tmp_path):
    """As a user types it: the command, then the Python API on what it wrote."""
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py",
        "--workdir", str(tmp_path), f"--config.init={pretrained}", "--config.unshare=all",
        f"--config.task.train={files}/cls_train.jsonl", f"--config.task.dev={files}/cls_dev.jsonl",
        "--config.task.max_seq_length=16", "--config.batch_size=8", "--config.eval_batch_size=8",
        "--config.total_steps=4", "--config.progress_bar=False",
        "--config.optim.learning_rate=1e-2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "layout all -> none" in proc.stdout and "new 2 (classifier" in proc.stdout
    assert " I1" not in proc.stdout and "INFO" not in proc.stderr  # library logs in train.log
    assert os.path.getsize(tmp_path / "train.log") > 0
    config, params = checkpoint.load(tmp_path / "best")
    assert config.layout == "none"
    # Every layer started from the one shared block and trained on its own.
    q = params["encoder"]["attention"]["query"]["kernel"]
    assert q.shape[0] == 3 and not np.allclose(q[0], q[1])
    _, shared = checkpoint.load(pretrained)
    assert not np.allclose(q[0], shared["encoder"]["attention"]["query"]["kernel"])
    pred = subprocess.run(
        [sys.executable, "-m", "finetune.predict", "--checkpoint", str(tmp_path / "best"),
         "--input", f"{files}/cls_test.jsonl", "--output", str(tmp_path / "p.jsonl")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pred.returncode == 0, pred.stderr[-3000:]
    rows = read_jsonl(tmp_path / "p.jsonl")
    assert len(rows) == 11 and {r["prediction"] for r in rows} <= {"neg", "pos"}


@pytest.mark.slow
def test_cli_unshared_choice(pretrained, race, tmp_path):
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/race.py",
        "--workdir", str(tmp_path), f"--config.init={pretrained}", "--config.unshare=all",
        f"--config.task.train={race / 'train.jsonl'}", f"--config.task.dev={race / 'dev'}",
        f"--config.task.test={race / 'test.json'}", "--config.task.num_choices=4",
        "--config.task.max_seq_length=24", "--config.total_steps=2", "--config.batch_size=8",
        "--config.eval_batch_size=8", "--config.progress_bar=False",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "layout all -> none" in done.stdout
    config, params = checkpoint.load(tmp_path / "best")
    assert config.layout == "none" and params["classifier"]["kernel"].shape == (32, 1)
    assert len(open(tmp_path / "predictions" / "dev.jsonl").readlines()) == choice.N_DEV


@pytest.mark.slow
def test_cli_unshared_qa(pretrained, qa_files, tmp_path):
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/cloze.py",
        "--workdir", str(tmp_path), f"--config.init={pretrained}", "--config.unshare=all",
        *(f"--config.task.{s}={qa_files / (s + '.json')}" for s in ("train", "dev", "test")),
        "--config.task.max_seq_length=24", "--config.task.doc_stride=6",
        "--config.task.max_query_length=6", "--config.task.char_level=False",
        "--config.total_steps=2", "--config.batch_size=8", "--config.progress_bar=False",
        "--config.lr_search.enabled=False",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "layout all -> none" in done.stdout
    config, params = checkpoint.load(tmp_path / "best")
    assert config.layout == "none" and params["classifier"]["kernel"].shape == (32, 2)


@pytest.mark.slow
def test_cli_unshared_seq2seq(pretrained, s2s_files, tmp_path):
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/entities.py",
        "--workdir", str(tmp_path), f"--config.init={pretrained}", "--config.unshare=all",
        *(f"--config.task.{s}={s2s_files / (s + '.jsonl')}" for s in ("train", "dev", "test")),
        "--config.task.max_seq_length=20", "--config.task.max_target_length=4",
        "--config.task.entity_scores=False", "--config.task.char_level=False",
        "--config.total_steps=2", "--config.batch_size=8", "--config.progress_bar=False",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "layout all -> none" in done.stdout
    config, params = checkpoint.load(tmp_path / "best")
    assert config.layout == "none" and params["mlm"]["output_bias"].shape == (config.vocab_size,)
    assert len(open(tmp_path / "predictions" / "test.jsonl").readlines()) == 5


@pytest.mark.slow
def test_cli_search_as_a_user_types_it_then_the_python_api(pretrained, one_word, tmp_path):
    """tsv.py's default: the search runs, prints every trial and the choice; the run trains with
    it; the files it wrote say so, and the best checkpoint predicts."""
    paths = {s: one_word / f"cls_{s}.jsonl" for s in ("train", "dev", "test")}
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py",
        "--workdir", str(tmp_path / "run"), f"--config.init={pretrained}",
        *(f"--config.task.{s}={f}" for s, f in paths.items()),
        "--config.task.max_seq_length=16", "--config.batch_size=8", "--config.eval_batch_size=8",
        "--config.total_steps=60", "--config.lr_search.grid=1e-5,1e-3,3.0",
        "--config.lr_search.budget=2", "--config.progress_bar=False",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "learning rate searched on dev, head lr x10 (auto: hidden 32 <= 256" in out
    assert "learning-rate search on seed 0: 3 trials of 40 steps (the run: 60)" in out
    record = json.loads((tmp_path / "run" / "lr_search.json").read_text())
    assert out.count("  lr ") == 3 and f"learning rate {record['chosen']:g} (best dev" in out
    chosen = [t for t in record["trials"] if t["learning_rate"] == record["chosen"]][0]
    assert not chosen["collapsed"] and chosen["finite"]
    run_config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert run_config["optim"]["learning_rate"] == record["chosen"]
    assert run_config["optim"]["lr_multipliers"] == "^classifier/=10"
    assert json.loads((tmp_path / "run" / "results.json").read_text())["lr_search"] == record
    config, _ = checkpoint.load(tmp_path / "run" / "best")
    assert config.hidden_size == 32
    values = runs.predict_file(
        str(tmp_path / "run" / "best"), str(paths["dev"]), str(tmp_path / "p")
    )
    dev = json.loads((tmp_path / "run" / "results.json").read_text())["dev"]["accuracy"]
    assert values["accuracy"] == pytest.approx(dev, rel=1e-3)


def test_explicit_control_and_bad_input(tmp_path):
    a = write_run(tmp_path, "a", [0.5, 0.6], [0.5, 0.7])
    b = write_run(tmp_path, "b", [0.5, 0.6], [0.6, 0.6])
    rows = compare.main([a, "--control", b])
    assert rows[0]["run"] == b and rows[1]["diff"] == pytest.approx(0.0)
    assert len(compare.main([a, b, "--control", b + "/"])) == 2  # the same run, not a third row
    f1 = write_run(tmp_path, "f1", [0.5, 0.6], [0.5, 0.7], metric="f1")
    with pytest.raises(SystemExit):  # parser.error: one line, exit 2
        compare.main([a, "--control", f1])
    missing = tmp_path / "nothing"
    r = subprocess.run(
        [sys.executable, "-m", "finetune.compare", a, str(missing)], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"python -m finetune.compare: error: {missing}/summary.json: no such file "
        f"(is {missing} a finished `python -m finetune` run?)"
    )


@pytest.mark.slow
def test_cli_glue_preset_as_the_readme_types_it_then_predict(pretrained, tmp_path):
    """README's benchmark command (a GLUE task from a data dir as GLUE ships it), then
    `finetune.predict` on the test file: both write RTE.tsv, with the same rows."""
    from support.glue import write_glue

    made = write_glue(tmp_path / "GLUE", ("rte",))
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/glue.py:rte",
        "--workdir", str(tmp_path / "rte"), f"--config.task.data_dir={tmp_path / 'GLUE'}",
        f"--config.init={pretrained}", "--config.task.max_seq_length=16",
        "--config.batch_size=8", "--config.eval_batch_size=8", "--config.total_steps=2",
        "--config.progress_bar=False",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sub = (tmp_path / "rte" / "submission" / "RTE.tsv").read_text().splitlines()
    assert sub[0] == "index\tprediction"
    assert [r.split("\t")[0] for r in sub[1:]] == made["rte"]["test.tsv"]
    assert {r.split("\t")[1] for r in sub[1:]} <= {"entailment", "not_entailment"}
    pred = subprocess.run(
        [sys.executable, "-m", "finetune.predict", "--checkpoint", str(tmp_path / "rte" / "best"),
         "--input", str(tmp_path / "GLUE" / "RTE" / "test.tsv"),
         "--output", str(tmp_path / "out" / "test.jsonl")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pred.returncode == 0, pred.stderr[-3000:]
    assert json.loads(pred.stdout.splitlines()[-1])["submission"].endswith("RTE.tsv")
    assert (tmp_path / "out" / "RTE.tsv").read_text().splitlines() == sub
    # without the data dir: one line naming the file and the setting, before any work
    bad_cmd = [a for a in cmd if not a.startswith("--config.task.data_dir")]
    bad_cmd[bad_cmd.index(str(tmp_path / "rte"))] = str(tmp_path / "bad")
    bad = subprocess.run(bad_cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "task.data_dir=''" in bad.stderr, bad.stderr[-2000:]

"""Sweeps that run processes: a step's command and its timing, `python -m pretrain.sweep` refusing
bad input in one line, its dry run and print launcher, a tiny sweep run, resumed and submitted
through submitit's local executor, a step killed with its sweep, a sweep waiting while another
prepares the data, configs/sweeps/tiny.py as shipped, and a tiny version of issue 37's unshare
study (tests/test_sweep.py and tests/test_unshare_study.py check the rest in process)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from support import ROOT
from support.pretraining import MODEL, write_corpus
from support.sweeps import PRETRAIN, STUDY, sweep_cli, table, write_tiny_inputs

from albert_jax.experiments import sweep_report
from albert_jax.experiments.sweep import SweepError, load, points
from albert_jax.train import lock


def test_a_prepare_step_keeps_the_file_its_command_wrote(tmp_path):
    """A dataset's prepare step is done when its command has written the dataset's file: the
    sweep must not write its record over that file (it once replaced train.jsonl with it). A
    corpus step's done file is the sweep's own marker."""
    from albert_jax.experiments.sweep import Step, run_step

    made = tmp_path / "data" / "train.jsonl"
    write = f"import pathlib; pathlib.Path({str(made)!r}).write_text('{{\"text\": 1}}')"
    step = Step("prepare", "ds", [sys.executable, "-c", write], str(tmp_path / "d"), str(made))
    made.parent.mkdir()
    run_step(step, "[1/1]")
    assert made.read_text() == '{"text": 1}' and step.done()
    marker = tmp_path / "m" / "sweep_prepared.json"
    corpus = Step(
        "prepare", "c", [sys.executable, "-c", "pass"], str(marker.parent), str(marker), True
    )
    run_step(corpus, "[1/1]")
    assert json.loads(marker.read_text())["command"] == corpus.command
    lazy = Step(
        "prepare", "lazy", [sys.executable, "-c", "pass"], str(tmp_path / "l"), str(tmp_path / "no")
    )
    with pytest.raises(SweepError, match="did not write"):
        run_step(lazy, "[1/1]")


# A stand-in for a training run: drops the rows logged past its checkpoint (as MetricWriter
# does), appends this invocation's, writes summary.json when it exits 0.
FAKE_RUN = """
import json, os, sys
d, resume, rows, rc = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
path = os.path.join(d, "seed_0", "metrics.jsonl")
os.makedirs(os.path.dirname(path), exist_ok=True)
old = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
rows = [{"step": s, "split": "train", "step_time_s": t} for s, t in rows]
with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\\n" for r in [r for r in old if r["step"] <= resume] + rows)
if rc == 0:
    open(os.path.join(d, "summary.json"), "w").write("{}")
sys.exit(rc)
"""


def test_step_time_leaves_out_each_starts_interval_and_wall_time_sums_the_invocations(tmp_path):
    """A step failed, then killed outright, then resumed to the end: its step time is the median
    of the intervals that did not include a start (compilation), including a start whose rows a
    later resume cut off; its wall time is the sum of the three (the killed one's until its last
    log line)."""
    from albert_jax.experiments.sweep import Step, read_record, run_step

    d = str(tmp_path / "ft")

    def invoke(resume, rows, rc):
        cmd = [sys.executable, "-c", FAKE_RUN, d, str(resume), json.dumps(rows), str(rc)]
        step = Step("finetune", "ft", cmd, d, os.path.join(d, "summary.json"))
        if rc:
            with pytest.raises(SweepError, match="failed"):
                run_step(step, "[1/1]")
        else:
            run_step(step, "[1/1]")

    invoke(0, [[2, 9.0], [4, 0.1], [6, 0.1]], 1)  # compiled at the start, failed after step 6
    invoke(4, [[6, 7.0], [8, 0.3]], 1)  # resumed at 4; its rows are cut by the next resume
    record = read_record(d)
    del record["runs"][-1]["wall_s"]  # as if the sweep itself had been killed
    with open(os.path.join(d, "sweep_step.json"), "w") as f:
        json.dump(record, f)
    started = record["runs"][-1]["started"]
    os.utime(os.path.join(d, "sweep.log"), (started + 30, started + 30))  # its last output
    invoke(4, [[6, 5.0], [8, 0.2], [10, 0.4]], 0)  # the checkpoint at 8 was never written

    rows = [json.loads(x) for x in open(os.path.join(d, "seed_0", "metrics.jsonl"))]
    assert [(r["step"], r["step_time_s"]) for r in rows] == [
        (2, 9.0), (4, 0.1), (6, 5.0), (8, 0.2), (10, 0.4)
    ]  # fmt: skip
    assert sweep_report.steady_step_time(d, "seed_0/metrics.jsonl") == 0.2  # of 0.1, 0.2, 0.4
    runs = read_record(d)["runs"]
    assert len(runs) == 3 and runs[1]["wall_s"] == 30.0 and runs[1]["killed"]
    assert sweep_report.wall_time(d) == pytest.approx(sum(r["wall_s"] for r in runs), abs=0.11)
    assert 30 <= sweep_report.wall_time(d) < 40  # the other two: a fraction of a second each
    # a directory no sweep recorded: only its first interval is left out
    assert sweep_report.steady_step_time(os.path.join(d, "seed_0")) == 0.3


@pytest.mark.parametrize(
    "sets, message",
    [
        (["pretrain.total_stps=3"], "pretrain.total_stps: .*cpu_small.py's config has no field"),
        (["pretrain.total_steps=abc"], "pretrain.total_steps='abc': invalid literal for int"),
        (["finetune.optim.learning_rate=x"], "finetune.optim.learning_rate='x': could not conv"),
        (["seeds=a,b"], "--set 'seeds=a,b': seeds must be integers"),
    ],
)
def test_a_bad_set_fails_at_once_as_one_line_before_any_data(tmp_path, sets, message):
    work = tmp_path / "sw"
    start = time.monotonic()
    done = sweep_cli("--config", "configs/sweeps/tiny.py", "--workdir", str(work),
                *[f"--set={s}" for s in sets], check_rc=False)  # fmt: skip
    assert time.monotonic() - start < 30  # not after the data build (~50 s)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert re.match(f"error: {message}", lines[0]), lines[0]
    assert not work.exists()


def test_a_missing_sweep_file_is_one_line(tmp_path):
    done = sweep_cli(
        "--config", "configs/sweeps/tny.py", "--workdir", str(tmp_path), check_rc=False
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "error: configs/sweeps/tny.py: no such config file"


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_dry_run_and_the_print_launcher_cover_exactly_the_same_steps(tmp_path):
    config = "configs/sweeps/tiny.py"
    work = str(tmp_path / "sw")
    full = _commands(sweep_cli("--config", config, "--workdir", work, "--dry_run").stdout)
    # the sentiment dataset and the corpus, then 2 groups of (pretrain, sentiment x 2 unshare x
    # 2 seeds, each seed its own run)
    assert len(full) == 2 + 2 * 5 and "finetune.prepare sentiment" in full[0]
    jobs = _commands(sweep_cli("--config", config, "--workdir", work, "--launcher=print").stdout)
    assert len(jobs) == 2 and all(f"--group={i}" in j for i, j in enumerate(jobs))
    per_job = []
    for job in jobs:
        args = job.split()[3:]  # drop "python -m pretrain.sweep"
        per_job += _commands(sweep_cli(*args, "--dry_run").stdout)[
            2:
        ]  # each repeats the data steps
    assert per_job == full[2:]
    assert not os.path.exists(os.path.join(work, "pretrain"))  # nothing ran


SWEEP = """
from albert_jax.experiments.sweep import Sweep


def get_sweep():
    return Sweep(
        pretrain_config={pretrain!r},
        tasks={{"cls": "configs/finetune/tsv.py"}},
        grid={{"pretrain.model.layout": ["all", "none"], "finetune.unshare": ["", "all"]}},
        finetune={{
            "task.train": {train!r}, "task.dev": {dev!r}, "task.test": {dev!r},
            "task.max_seq_length": 32,
            "total_steps": 2, "eval_every": 2, "batch_size": 8, "eval_batch_size": 8,
            "log_every": 1, "progress_bar": False,
        }},
        seeds=(0, 1),
    )
"""


@pytest.mark.slow
def test_tiny_sweep_runs_resumes_without_redoing_and_submits(tmp_path):
    write_tiny_inputs(tmp_path)
    config = tmp_path / "sweep.py"
    config.write_text(
        SWEEP.format(
            pretrain=str(tmp_path / "pre.py"),
            train=str(tmp_path / "train.tsv"),
            dev=str(tmp_path / "dev.tsv"),
        )
    )
    work = tmp_path / "sw"
    out = sweep_cli("--config", str(config), "--workdir", str(work)).stdout
    assert "sweep: 10 steps, 0 already done" in out  # 2 pretraining + 4 points x 2 seeds
    with open(work / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 2 and {r["task"] for r in rows} == {"cls"}
    layout, unshare = "pretrain.model.layout", "finetune.unshare"
    assert {r[layout] for r in rows} == {"all", "none"}
    shared = [r for r in rows if r[layout] == "all" and r[unshare] == ""]
    unshared = [r for r in rows if r[layout] == "all" and r[unshare] == "all"]
    assert int(unshared[0]["params_finetuned"]) > int(shared[0]["params_finetuned"])
    assert (work / "plots" / "cls_scores.png").exists()
    # tsv.py searches the learning rate: every point (layout) its own search on its first
    # seed, in its row; the later seed trains with the rate it chose
    for row in rows:
        point = work / "finetune" / "cls" / row["point"]
        record = json.loads((point / "seed_0" / "lr_search.json").read_text())
        assert float(row["learning_rate"]) == record["chosen"]
        later = json.loads((point / "seed_1" / "config.json").read_text())
        assert later["optim"]["learning_rate"] == record["chosen"]
        assert not (point / "seed_1" / "lr_search.json").exists()
        rates = [t["learning_rate"] for t in record["trials"]]  # 3 a round (retries: more rounds)
        assert len(set(rates)) == 3 and len(rates) % 3 == 0

    # rerun: nothing is redone (no file of a finished step is rewritten)
    summary = work / "finetune" / "cls" / "layout=none,unshare=all" / "seed_1" / "summary.json"
    stamp = summary.stat().st_mtime_ns
    again = sweep_cli("--config", str(config), "--workdir", str(work)).stdout
    assert "sweep: 10 steps, 10 already done" in again and "..." not in again
    assert summary.stat().st_mtime_ns == stamp

    # an interrupted seed (its summary never written) is the only step run again, here
    # through submitit's local executor (the cluster path, on this machine)
    summary.unlink()
    done = sweep_cli("--config", str(config), "--workdir", str(work), "--launcher=local")
    assert "group 1: job" in done.stdout and "group 0: job" in done.stdout
    log = "".join(p.read_text() for p in (work / "submitit").glob("**/*_log.out"))
    assert log.count("already done") == 2 and log.count(" ...") == 1
    assert "cls layout=none,unshare=all seed 1 ..." in log
    assert summary.exists()


def _running(pid: int) -> bool:
    """Whether pid is a live process (a zombie waiting to be reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


# A sweep that runs one step (a process that prints its pid and sleeps), in a process of its own
ONE_STEP = """
import sys
from albert_jax.experiments.sweep import Step, run_step

work = sys.argv[1]
command = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(300)"]
run_step(Step("pretrain", "sleeper", command, work, work + "/done"), "[1/1]")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_a_step_dies_with_its_killed_sweep(tmp_path):
    sweep = subprocess.Popen([sys.executable, "-c", ONE_STEP, str(tmp_path)], cwd=ROOT)
    log, child = tmp_path / "sweep.log", None
    try:
        lines = lambda: log.exists() and log.read_text().splitlines()[1:]  # noqa: E731
        child = int(_wait_for(lines, 60, "the step to start")[0])
        assert _running(child)
        sweep.kill()  # SIGKILL: the sweep cannot stop its step itself
        sweep.wait()
        _wait_for(lambda: not _running(child), 10, "the step to die with the sweep")
    finally:
        sweep.kill()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.slow
def test_a_sweep_waits_while_another_prepares_the_data(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    model = dict(MODEL, layout="all")
    model.pop("vocab_size")
    (tmp_path / "pre.py").write_text(
        PRETRAIN.format(corpus=str(tmp_path / "corpus.txt"), model=model, steps=2)
    )
    config = tmp_path / "sweep.py"
    config.write_text(SWEEP_PRETRAIN_ONLY.format(pretrain=str(tmp_path / "pre.py")))
    work = tmp_path / "sw"
    lock.acquire(str(work), ".lock-data")  # another sweep (this process) preparing the data
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "pretrain.sweep", "--config", str(config), "--workdir",
             str(work)], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_for(lambda: "note: waiting: " in out.read_text(), 120, "the sweep to wait")
        time.sleep(2)
        assert sweep.poll() is None and not (work / "data").exists()  # waits, builds nothing
        lock.release(str(work), ".lock-data")
        _wait_for(lambda: "] data " in out.read_text(), 60, "the data preparation to start")
    finally:
        lock.release(str(work), ".lock-data")
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    assert "sweep: 1 steps, 0 already done" in out.read_text()


SWEEP_PRETRAIN_ONLY = """
from albert_jax.experiments.sweep import Sweep


def get_sweep():
    return Sweep(pretrain_config={pretrain!r}, tasks={{}}, grid={{}})
"""


@pytest.mark.slow
def test_the_shipped_tiny_sweep_runs_end_to_end(tmp_path):
    """configs/sweeps/tiny.py as shipped (its vocabulary, warmup, data): every step runs, the
    sentiment dataset is built in the sweep directory and read from there, and the report has
    every point and seed with its step and wall times. ~5 minutes on two CPU cores."""
    work = tmp_path / "sw"
    out = sweep_cli("--config", "configs/sweeps/tiny.py", "--workdir", str(work)).stdout
    assert "sentiment dataset ..." in out and "sweep: 10 steps, 0 already done" in out
    data = work / "data" / "finetune" / "sentiment"
    assert (data / "train.jsonl").exists() and (data / "test.jsonl").exists()
    seed = work / "finetune" / "sentiment" / "layout=none,unshare=all" / "seed_1"
    assert json.loads((seed / "config.json").read_text())["task"]["dev"] == str(data / "dev.jsonl")
    with open(work / "results.csv") as f:
        rows = list(csv.DictReader(f))
    points = {(r["pretrain.model.layout"], r["finetune.unshare"], r["seed"]) for r in rows}
    assert len(rows) == 8 and points == {
        (layout, unshare, seed) for layout in ("all", "none") for unshare in ("", "all")
        for seed in ("0", "1")
    }  # fmt: skip
    for r in rows:
        assert 0 <= float(r["test_accuracy"]) <= 1 and float(r["pretrain_mlm_loss"]) > 0
        for key in ("pretrain_step_s", "pretrain_wall_s", "finetune_step_s", "finetune_wall_s"):
            assert float(r[key]) > 0, key  # each run logged an interval past its first
    md = (work / "results.md").read_text()
    scores, drift = (block for block in md.split("\n\n") if block.startswith("| model.layout"))
    assert md.startswith("### sentiment (accuracy") and scores.count("\n| all |") == 2
    # The drift table: the unshared rows only, from either pretrained layout.
    assert [row.split(" | ")[:2] for row in drift.splitlines()[2:]] == [
        ["| all", "all"],
        ["| none", "all"],
    ]
    assert (work / "plots" / "sentiment_scores.png").exists()


@pytest.mark.slow
def test_a_tiny_study_runs_end_to_end(tmp_path):
    """The study's design (layouts, searched rates, random-init control, report) at toy scale:
    a synthetic pretraining run of 2 steps, a made-up classification task through
    searched.py, layouts '' and all, seeds 0 and 1, 4 steps evaluated twice."""
    import dataclasses

    write_tiny_inputs(tmp_path)
    study = load(STUDY)
    tiny = dataclasses.replace(
        study,
        pretrain_config=str(tmp_path / "pre.py"),
        tasks={"cls": "configs/finetune/searched.py:tsv"},
        grid={"finetune.unshare": ["", "all"]},
        finetune={
            "task.train": str(tmp_path / "train.tsv"), "task.dev": str(tmp_path / "dev.tsv"),
            "task.test": str(tmp_path / "dev.tsv"), "task.max_seq_length": 32,
            "total_steps": 4, "eval_every": 2, "batch_size": 8, "eval_batch_size": 8,
            "log_every": 1, "progress_bar": False,
        },
        seeds=(0, 1),
        results=str(tmp_path / "kept"),  # the repository's folder of finished cells
    )  # fmt: skip
    config = tmp_path / "tiny_study.py"
    config.write_text(
        "from albert_jax.experiments.sweep import Sweep\n\n\n"
        f"def get_sweep():\n    return Sweep(**{dataclasses.asdict(tiny)!r})\n"
    )
    work = tmp_path / "sw"
    out = sweep_cli("--config", str(config), "--workdir", str(work)).stdout
    assert "sweep: 7 steps, 0 already done" in out  # pretraining, 3 points (control) x 2 seeds
    kept = tmp_path / "kept"
    md = (kept / "results.md").read_text()  # the report is the kept cells'
    assert not (work / "results.md").exists()
    head = next(line for line in md.splitlines() if line.startswith("| unshare |"))
    for col in ("test Welch p vs shared", "MDE (α .05, power .8)", "collapsed seeds", "lr"):
        assert f"| {col} |" in head
    assert len(table(md, "| all |")) == 2  # the score table and the drift table
    with open(kept / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 2 and all(r["learning_rate"] for r in rows)  # searched per point
    unshared = [r for r in rows if r["finetune.unshare"] == "all"]
    assert all(float(r["drift_attention"]) > 0 for r in unshared)
    assert not any(r.get("drift_attention") for r in rows if r not in unshared)
    for name in ("cls_scores", "cls_dev_curves", "cls_drift"):
        assert (kept / "plots" / f"{name}.png").exists(), name
    assert [p.name() for p in points(tiny)] == ["unshare=default", "unshare=all"]

    # What is kept: small files only, each cell with the pretraining's fingerprint
    fingerprint = json.loads((kept / "pretrain" / "base" / "fingerprint.json").read_text())
    cells = sorted(kept.glob("finetune/cls/*/seed_*/cell.json"))
    assert len(cells) == 6
    assert {json.loads(c.read_text())["fingerprint"] for c in cells} == {fingerprint["sha256"]}
    assert not list(kept.glob("**/checkpoints")) and not list(kept.glob("**/predictions"))
    assert max(f.stat().st_size for f in kept.glob("finetune/**/*") if f.is_file()) < 100_000

    # A fresh checkout: the sweep directory is gone; the pretraining is rebuilt, matches, and
    # every kept cell is done without running; the report comes out the same
    shutil.rmtree(work)
    again = sweep_cli("--config", str(config), "--workdir", str(work)).stdout
    ran = [line for line in again.splitlines() if line.endswith(" ...")]
    assert len(ran) == 2 and "data " in ran[0] and "pretrain base" in ran[1]  # no cell ran
    assert (kept / "results.md").read_text() == md
    assert (work / "finetune" / "cls" / "unshare=all" / "summary.json").exists()  # restored
    # the report from the kept cells alone
    (kept / "results.md").unlink()
    shutil.rmtree(work)
    sweep_cli("--config", str(config), "--workdir", str(work), "--report_only")
    assert (kept / "results.md").read_text() == md
    # another pretraining (a changed fingerprint) cannot resume them: the sweep says so
    (kept / "pretrain" / "base" / "fingerprint.json").write_text('{"sha256": "0123456789abcdef"}')
    done = sweep_cli("--config", str(config), "--workdir", str(work), check_rc=False)
    assert done.returncode != 0 and "is not the pretraining the kept results" in done.stderr

"""Runs that survive users and crashes: one run per workdir (the lock), a run whose every
checkpoint is unreadable refuses rather than starting over, `start_over` starts exactly fresh,
and SIGKILL at chosen and random moments (albert_jax/train/faults.py) then a rerun ends with the
files of an uninterrupted run: results.json, best.json and predictions for fine-tuning, the final
model's parameters for pretraining."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from support.trainer import assert_trees_equal, ckpt_steps, load_state, read_metrics, run

from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.checkpoint import CheckpointError
from albert_jax.train import lock
from albert_jax.train.faults import CRASH_ENV
from albert_jax.train.metrics import MetricWriter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_backend_optimization_level=0"}


# --------------------------------------------------------------------------- the lock


def _lock_file(workdir, pid, host=None, start_time=None):
    os.makedirs(workdir, exist_ok=True)
    holder = {"pid": pid, "host": host or os.uname().nodename, "since": "then", "command": "x"}
    holder["start_time"] = start_time or lock._start_time(pid)
    with open(os.path.join(workdir, lock.LOCK_NAME), "w") as f:
        json.dump(holder, f)


def test_a_live_holder_refuses_a_second_run_and_a_dead_one_is_taken_over(tmp_path, capsys):
    live = subprocess.Popen(["sleep", "60"])
    try:
        _lock_file(tmp_path / "a", live.pid)
        with pytest.raises(lock.WorkdirBusyError, match=f"in use by pid {live.pid} since then"):
            lock.acquire(str(tmp_path / "a"))
    finally:
        live.kill()
        live.wait()
    dead = subprocess.Popen(["true"])
    dead.wait()
    _lock_file(tmp_path / "b", dead.pid, start_time="1")
    assert lock.acquire(str(tmp_path / "b"))
    assert (
        f"taking over the stale lock on {tmp_path / 'b'} (pid {dead.pid}" in capsys.readouterr().out
    )
    held = json.loads((tmp_path / "b" / lock.LOCK_NAME).read_text())
    assert held["pid"] == os.getpid()
    assert lock.acquire(str(tmp_path / "b"))  # reentrant: fine-tuning, then its trainer
    lock.release(str(tmp_path / "b"))
    assert (tmp_path / "b" / lock.LOCK_NAME).exists()
    lock.release(str(tmp_path / "b"))
    assert not (tmp_path / "b" / lock.LOCK_NAME).exists()
    # A pid now reused by another process (other start time) is stale too.
    _lock_file(tmp_path / "c", os.getppid(), start_time="1")
    with lock.hold(str(tmp_path / "c")):
        pass
    # Another host's lock is never guessed about.
    _lock_file(tmp_path / "d", 1, host="elsewhere")
    with pytest.raises(lock.WorkdirBusyError, match="on host elsewhere.*delete .*\\.lock"):
        lock.acquire(str(tmp_path / "d"))


# Each racer waits for `go`, tries the lock, says whether it got it, and keeps it until `done`.
_RACER = """
import os, sys, time
from albert_jax.train import lock
work = sys.argv[1]
print("ready", flush=True)
while not os.path.exists(work + ".go"):
    time.sleep(0.001)
try:
    lock.acquire(work)
    print("held", flush=True)
except lock.WorkdirBusyError:
    print("busy", flush=True)
while not os.path.exists(work + ".done"):
    time.sleep(0.01)
"""


def _answer(out) -> str:
    line = out.readline()
    return _answer(out) if line.startswith("note:") else line.strip()


@pytest.mark.slow  # 6 rounds of 5 processes (~45 s on two busy cores)
def test_racers_on_a_stale_lock_leave_exactly_one_holder(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    for trial in range(6):
        work = str(tmp_path / f"run{trial}")
        _lock_file(work, dead.pid, start_time="1")
        racers = [
            subprocess.Popen([sys.executable, "-c", _RACER, work], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(5)
        ]  # fmt: skip
        try:
            assert [p.stdout.readline().strip() for p in racers] == ["ready"] * 5
            open(work + ".go", "w").close()
            said = [_answer(p.stdout) for p in racers]
            holder = json.loads(open(os.path.join(work, lock.LOCK_NAME)).read())
        finally:
            open(work + ".done", "w").close()
            for p in racers:
                p.wait(timeout=30)
        assert sorted(said) == ["busy"] * 4 + ["held"], (trial, said)
        assert holder["pid"] == racers[said.index("held")].pid
        assert not os.path.exists(os.path.join(work, lock.LOCK_NAME))  # released at exit


def test_a_second_finetune_on_a_busy_workdir_is_refused_in_one_line(pretrained, files, tmp_path):
    live = subprocess.Popen(["sleep", "120"])
    try:
        _lock_file(tmp_path / "run", live.pid)
        before = sorted(os.listdir(tmp_path / "run"))
        proc = subprocess.run(
            [*_finetune_cmd(pretrained, files, tmp_path / "run")],
            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        live.kill()
        live.wait()
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and f"in use by pid {live.pid}" in lines[-1]
    assert [line for line in lines if line.startswith("Traceback")] == []
    assert sorted(os.listdir(tmp_path / "run")) == before  # nothing of it written


# --------------------------------------------------------------------------- unreadable checkpoints


@pytest.mark.slow  # three short trainings (~30 s)
def test_every_checkpoint_unreadable_refuses_and_start_over_equals_a_fresh_run(tmp_path):
    work = tmp_path / "run"
    run(work, total_steps=4)
    for step in ckpt_steps(work):
        os.remove(work / "checkpoints" / str(step) / "state" / "_METADATA")
    with pytest.raises(
        CheckpointError, match=r"no checkpoint in .* is readable \(step 4: .*step 2"
    ) as e:
        run(work, total_steps=4)
    assert "\n" not in str(e.value) and len(str(e.value)) < 1200  # not TensorStore's specs
    assert ckpt_steps(work) == [2, 4]  # nothing deleted or overwritten
    assert not (work / "checkpoints" / "4" / "state" / "_METADATA").exists()
    run(work, total_steps=4, start_over=True)
    fresh = tmp_path / "fresh"
    run(fresh, total_steps=4)
    assert_trees_equal(load_state(work, 4), load_state(fresh, 4))
    a, b = read_metrics(work), read_metrics(fresh)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    for s in a:
        assert a[s]["loss"] == b[s]["loss"], s


def test_resumed_metrics_drop_the_rows_past_the_checkpoint(tmp_path):
    rows = [
        {"step": 1, "split": "train", "loss": 1.0},
        {"step": 2, "split": "train", "loss": 2.0},
        {"step": 2, "split": "eval", "accuracy": 0.5},  # repeated by the resumed run
        {"step": 3, "split": "train", "loss": 3.0},
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "spl'  # cut by a kill
    (tmp_path / "metrics.jsonl").write_text(text)
    writer = MetricWriter(str(tmp_path), resume_step=2)
    writer.write(2, {"accuracy": 0.5}, prefix="eval")
    writer.close()
    kept = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kept == rows[:3]


# --------------------------------------------------------------------------- SIGKILL, then rerun


def _finetune_cmd(pretrained, files, workdir):
    return [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py",
        "--workdir", str(workdir), f"--config.init={pretrained}",
        # Regression: its dev pearson moves at every evaluation, so the best step is a choice.
        "--config.task.type=regression", "--config.task.text_a=a", "--config.task.text_b=b",
        "--config.task.label=score", f"--config.task.train={files}/reg_train.jsonl",
        f"--config.task.dev={files}/reg_dev.jsonl", f"--config.task.test={files}/reg_test.jsonl",
        "--config.task.max_seq_length=16",
        "--config.batch_size=8", "--config.eval_batch_size=8", "--config.total_steps=8",
        "--config.eval_every=2", "--config.progress_bar=False", "--config.lr_search.enabled=False",
        "--config.optim.learning_rate=1e-3", "--config.optim.lr_multipliers=",
    ]  # fmt: skip


FINETUNE_OUTPUTS = ("results.json", "best.json", "predictions/dev.jsonl", "predictions/test.jsonl")


def _killed_then_rerun(cmd, workdir, point=None, after_s=None):
    """Run `cmd` killed at crash point `point` (or after `after_s` seconds), then rerun it to
    the end; returns whether the first run was killed."""
    env = {**ENV, CRASH_ENV: point} if point else ENV
    log = os.path.join(os.path.dirname(workdir), f"{os.path.basename(workdir)}.out")
    with open(log, "w") as out:  # a file, not a pipe: nothing can hold it open after the kill
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=after_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    with open(log) as f:
        assert killed or (after_s and proc.returncode == 0), (point, f.read()[-3000:])
    again = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, (point, again.stderr[-3000:])
    return killed


@pytest.mark.slow
def test_sigterm_saves_exits_0_and_the_rerun_resumes(pretrained, files, tmp_path):
    work = tmp_path / "run"
    longer = ["--config.total_steps=200", "--config.eval_every=100", "--config.log_every=1"]
    cmd = _finetune_cmd(pretrained, files, work) + longer  # later flags win
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    metrics = work / "metrics.jsonl"  # created before the trainer takes SIGTERM: wait for a row
    while not (metrics.exists() and metrics.stat().st_size) and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "stopped before step 200: rerun to resume" in out
    assert "step/s" not in err  # --config.progress_bar=False: no bar
    saved = ckpt_steps(work)
    assert saved and saved[-1] < 200 and not (work / "results.json").exists()
    again = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from step {saved[-1]}" in again.stdout
    assert json.loads((work / "results.json").read_text())["best_step"] in (100, 200)


@pytest.mark.slow
def test_a_rerun_with_other_inputs_is_refused_naming_them(pretrained, files, tmp_path):
    work = tmp_path / "run"
    cmd = _finetune_cmd(pretrained, files, work)
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, capture_output=True, timeout=600)
    before = {name: (work / name).read_bytes() for name in ("config.json", *FINETUNE_OUTPUTS)}
    other = [*cmd, f"--config.task.train={files}/reg_dev.jsonl", "--config.task.max_seq_length=12"]
    proc = subprocess.run(other, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("Traceback")] == []
    assert lines[-1].startswith(f"error: {work} holds a run with other inputs (")
    assert f"task.train was '{files}/reg_train.jsonl', now '{files}/reg_dev.jsonl'" in lines[-1]
    assert "task.max_seq_length was 16, now 12" in lines[-1]
    assert lines[-1].endswith("or pass --config.start_over=True to start over")
    assert "resumed" not in proc.stdout
    assert {name: (work / name).read_bytes() for name in before} == before


def _holders(prefix: str) -> list[int]:
    """Pids of processes with a file under `prefix` open (Linux /proc)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix) for fd in fds):
                pids.append(int(pid))
        except OSError:  # gone, or not ours to read
            continue
    return pids


def _eval_rows(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["split"] == "eval"]


@pytest.mark.slow
def test_finetune_killed_anywhere_resumes_to_the_uninterrupted_files(pretrained, files, tmp_path):
    reference = tmp_path / "reference"
    t0 = time.monotonic()
    subprocess.run(_finetune_cmd(pretrained, files, reference), cwd=ROOT, env=ENV, check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    wall = time.monotonic() - t0
    want = {name: (reference / name).read_bytes() for name in FINETUNE_OUTPUTS}
    assert json.loads(want["best.json"])["step"] in (4, 6, 8)  # not just the first evaluation
    # mid-step; right after a checkpoint (its async save in flight); during an evaluation; the
    # best model written but not best.json; after the final checkpoint, before the final
    # evaluation; and while writing the predictions (dev written, test not).
    points = ["step@3", "checkpoint@4", "eval@4", "best@4", "eval@8", "final", "predictions"]
    rng = np.random.default_rng(0)
    moments = [(p, None) for p in points] + [(None, wall * f) for f in rng.uniform(0.3, 0.9, 2)]
    for i, (point, after_s) in enumerate(moments):
        work = tmp_path / f"run{i}"
        killed = _killed_then_rerun(_finetune_cmd(pretrained, files, work), work, point, after_s)
        assert killed or point is None
        for name in FINETUNE_OUTPUTS:
            assert (work / name).read_bytes() == want[name], (point, after_s, name)
        assert _eval_rows(work) == _eval_rows(reference), (point, after_s)
        assert not (work / lock.LOCK_NAME).exists()  # the rerun released it


@pytest.mark.slow
def test_pretraining_killed_anywhere_resumes_to_bit_identical_parameters(tmp_path):
    short = [
        "--config.total_steps=6", "--config.optim.warmup_steps=1", "--config.checkpoint_every=2",
        "--config.eval_every=3", "--config.eval_batches=1", "--config.log_every=1",
        "--config.progress_bar=False", "--config.data.global_batch_size=4",
    ]  # fmt: skip

    def cmd(work):
        config = os.path.join(ROOT, "configs", "pretrain", "cpu_small.py")
        return [
            sys.executable,
            "-m",
            "pretrain",
            "--config",
            config,
            "--workdir",
            str(work),
            *short,
        ]

    reference = tmp_path / "reference"
    t0 = time.monotonic()
    subprocess.run(cmd(reference), cwd=ROOT, env=ENV, check=True, capture_output=True, timeout=900)
    wall = time.monotonic() - t0
    _, want = checkpoint.load(reference / "model")
    moments = [(p, None) for p in ("step@3", "checkpoint@4", "eval@3", "eval@6")] + [
        (None, wall * 0.8)
    ]
    for i, (point, after_s) in enumerate(moments):
        work = tmp_path / f"run{i}"
        shutil.copytree(reference / "data", work / "data")  # the corpus: built once
        _killed_then_rerun(cmd(work), work, point, after_s)
        time.sleep(2)  # a killed trainer's grain workers notice within a second and exit
        assert _holders(str(work)) == [], point
        _, got = checkpoint.load(work / "model")
        assert_trees_equal(got, want)
        assert _eval_rows(work) == _eval_rows(reference), point

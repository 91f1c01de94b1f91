"""Goodput (albert_jax/train/goodput.py): the recorder's arithmetic on a fake clock, and on short
runs of the synthetic task (tests/trainer_worker.py) the parts adding up to the wall time, the
`goodput` rows at log steps, and a resumed run charging the steps it redoes to `redone`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from support.trainer import run

from albert_jax.train import goodput, trainer
from albert_jax.train.faults import CRASH_ENV
from albert_jax.train.goodput import PARTS, Goodput, TimedInput, reached_step, summary_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "trainer_worker.py")
KEYS = {f"{p}_s" for p in (*PARTS, "other")} | {"wall_s", "goodput"}


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def tick(self, seconds):
        self.now += seconds


def test_every_second_goes_to_one_part():
    clock = FakeClock()
    g = Goodput(start=90.0, clock=clock)  # 10 s of start-up before the recorder existed
    clock.tick(2)
    with g.timed("checkpoint_restore"):
        clock.tick(3)
    g.redo_until = 1
    g.stepping(1)  # a step a killed run had taken
    step = g.first_call(lambda x: clock.tick(x) or x)
    assert step(4) == 4  # compile: only the first call
    clock.tick(1)
    g.stepping(2)
    assert step(0.5) == 0.5  # a later call: the step's own part
    with g.timed("input"):
        clock.tick(0.25)
        with g.timed("eval"):  # nested: the innermost block wins
            clock.tick(2)
        clock.tick(0.25)
    g.charged("checkpoint_save", clock.tick)(1.5)
    clock.tick(1)
    g.charge_to(None)  # after the loop: other
    clock.tick(0.5)
    s = g.summary()
    assert set(s) == KEYS
    assert s["startup_s"] == 12 and s["checkpoint_restore_s"] == 3 and s["compile_s"] == 4
    assert s["redone_s"] == 1 and s["productive_s"] == 1.5 and s["input_s"] == 0.5
    assert s["eval_s"] == 2 and s["checkpoint_save_s"] == 1.5 and s["other_s"] == 0.5
    assert s["wall_s"] == 26 and s["goodput"] == 1.5 / 26
    with pytest.raises(KeyError, match="unknown goodput part 'lunch'"):
        with g.timed("lunch"):
            pass


def test_the_clock_starts_at_the_process_start_or_at_the_previous_training(monkeypatch):
    monkeypatch.setattr(goodput, "_previous_end", None)  # no training in this process yet
    age = goodput.process_age()
    assert age >= time.monotonic() - goodput._IMPORTED > 0  # the process imported it later
    g = Goodput()
    assert g.summary()["startup_s"] == pytest.approx(age, abs=1.0)
    g.finish()
    later = Goodput()  # a second training in the same process
    assert later.start == goodput._previous_end > g.start
    assert later.summary()["wall_s"] < 1.0


def test_reached_step_and_the_workdir_record(tmp_path):
    assert reached_step(str(tmp_path)) == 0
    clock = FakeClock()
    first = Goodput(start=clock.now, clock=clock)
    first.resume(str(tmp_path), 0)
    clock.tick(10)
    first.stepping(1)
    clock.tick(10)
    written = first.write(str(tmp_path), 2)  # at its checkpoint of step 2
    assert [r["step"] for r in written["runs"]] == [2] and written["runs"][0]["goodput"] == 0.5
    # then it logged steps 3 to 5 and was killed
    rows = [{"step": 3, "split": "train"}, {"step": 5, "split": "goodput"}, {"step": 4}]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 9, "spl'  # cut by the kill
    (tmp_path / "metrics.jsonl").write_text(text)
    assert reached_step(str(tmp_path)) == 5

    second = Goodput(start=clock.now, clock=clock)
    second.resume(str(tmp_path), 2)  # the earlier run reached step 5
    assert second.redo_until == 5
    second.stepping(3)
    clock.tick(4)
    second.stepping(6)
    clock.tick(4)
    assert second.write(str(tmp_path), 6) == json.loads((tmp_path / "goodput.json").read_text())
    saved = json.loads((tmp_path / "goodput.json").read_text())
    first_run, this_run = saved["runs"]
    assert first_run == written["runs"][0]
    assert this_run["start_step"] == 2 and this_run["redone_steps"] == 3
    assert this_run["redone_s"] == 4 and this_run["productive_s"] == 4
    total = saved["total"]
    assert total["wall_s"] == 28 and total["productive_s"] == 14 and total["redone_steps"] == 3
    assert total["goodput"] == 0.5
    line = summary_line(this_run)
    assert line.startswith("goodput 50.0%: productive 4.0 s, startup 0.0 s, compile 0.0 s")
    assert "redone 4.0 s (3 steps)" in line and line.endswith("other 0.0 s; wall 8.0 s")


def test_timed_input_charges_the_loops_input_calls():
    clock = FakeClock()
    g = Goodput(start=clock.now, clock=clock)

    class Batches:
        def __next__(self):
            clock.tick(1)
            return "batch"

        def prefetch(self):
            clock.tick(2)

    timed = TimedInput(Batches(), g)
    assert next(timed) == "batch"
    timed.prefetch()
    assert g.summary()["input_s"] == 3


def test_start_over_deletes_goodput_json(tmp_path):
    (tmp_path / "goodput.json").write_text("{}")
    trainer.start_over(str(tmp_path))
    assert not (tmp_path / "goodput.json").exists()


def _goodput_rows(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["split"] == "goodput"]


def test_a_run_accounts_for_its_wall_time(tmp_path, capsys):
    """Checkpoints at 2 and 4, evaluation at 2 and 4, a row every step: each part the run has is
    positive, and they add up to its wall time (other: what ran after the loop untimed)."""
    run(tmp_path, total_steps=4, checkpoint_every=2, eval_every=2, eval_batches=1)
    record = json.loads((tmp_path / "goodput.json").read_text())
    (this,) = record["runs"]
    assert this["start_step"] == 0 and this["step"] == 4 and this["redone_steps"] == 0
    for part in ("productive", "startup", "compile", "eval", "checkpoint_save", "input"):
        assert this[f"{part}_s"] > 0, part
    assert this["checkpoint_restore_s"] > 0  # a fresh run: its initial weights
    assert this["redone_s"] == 0
    assert 0 <= this["other_s"] < 0.05 * this["wall_s"]
    parts = sum(this[f"{p}_s"] for p in PARTS)
    assert parts + this["other_s"] == pytest.approx(this["wall_s"], rel=1e-9)
    assert this["goodput"] == pytest.approx(this["productive_s"] / this["wall_s"])
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == summary_line(this) and out[-2].startswith("goodput ")
    rows = _goodput_rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert all(set(r) == KEYS | {"step", "split"} for r in rows)
    assert [r["wall_s"] for r in rows] == sorted(r["wall_s"] for r in rows)
    assert rows[-1]["wall_s"] < this["wall_s"]
    assert rows[0]["compile_s"] == rows[-1]["compile_s"] == this["compile_s"]


def test_a_resumed_run_charges_the_steps_it_redoes(tmp_path, monkeypatch, capsys):
    """Killed after step 6 was dispatched (rows of steps 1-5, the checkpoint of step 3): the
    rerun resumes at 3, redoes steps 4 and 5 and reports both runs in goodput.json."""

    def crash(name, step=None):
        if name == "step" and step == 6:
            raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(trainer, "crash_point", crash)
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, total_steps=6, checkpoint_every=3)
    assert [r["step"] for r in _goodput_rows(tmp_path)] == [1, 2, 3, 4, 5]
    killed = json.loads((tmp_path / "goodput.json").read_text())["runs"]
    assert [r["step"] for r in killed] == [3]  # as of its last checkpoint
    capsys.readouterr()
    run(tmp_path, total_steps=6, checkpoint_every=3)
    assert "resumed from step 3" in capsys.readouterr().out
    record = json.loads((tmp_path / "goodput.json").read_text())
    first, this = record["runs"]
    assert first == killed[0]
    assert this["start_step"] == 3 and this["step"] == 6 and this["redone_steps"] == 5 - 3
    assert this["redone_s"] > 0 and this["productive_s"] > 0 and this["checkpoint_restore_s"] > 0
    assert record["total"]["redone_steps"] == 2
    assert record["total"]["wall_s"] == pytest.approx(first["wall_s"] + this["wall_s"])
    # The resume kept the killed run's goodput row of step 3 and rewrote those of 4 and 5.
    rows = _goodput_rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[3]["redone_s"] > 0 and rows[2]["redone_s"] == 0


@pytest.mark.slow  # two processes (~40 s on two busy cores)
def test_a_sigkilled_run_is_redone_on_resume(tmp_path):
    """The real thing: SIGKILL after step 6 is dispatched (ALBERT_JAX_CRASH_AT=step@6), then
    rerun: the steps past the checkpoint of step 3 that the killed run logged are redone."""
    # batches 4 and 5 come slowly: the checkpoint of step 3 is complete before the kill
    spec = {"workdir": str(tmp_path), "delay_from": 4,
            "config": {"total_steps": 6, "checkpoint_every": 3}}  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, WORKER, json.dumps(spec)]
    killed = subprocess.run(cmd, cwd=ROOT, env={**env, CRASH_ENV: "step@6"}, capture_output=True)
    assert killed.returncode == -9, killed.stderr[-3000:]
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from step 3" in again.stdout
    line = [x for x in again.stdout.splitlines() if x.startswith("goodput ")]
    first, this = json.loads((tmp_path / "goodput.json").read_text())["runs"]
    assert first["step"] == 3 and this["start_step"] == 3 and this["step"] == 6
    assert this["redone_steps"] == 2 and this["redone_s"] > 0
    assert line == [summary_line(this)] and "(2 steps)" in line[0]

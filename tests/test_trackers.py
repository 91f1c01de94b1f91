"""Metrics trackers (issue 57): a bucket run's metrics, TensorBoard events and train.log reach the
bucket while it runs (part files folded into metrics.jsonl at start and close; a kill loses only
what came after the last sync), the tracker list of `TrainerConfig.trackers` with its checks, and
Weights & Biases offline."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from fake_bucket import fake_gcs
from support import ROOT

from albert_jax import paths
from albert_jax.train import metrics, trackers
from albert_jax.train.config import TrainConfigError, TrainerConfig
from albert_jax.train.metrics import MetricWriter, UploadError
from albert_jax.train.trackers import read_rows

FAKE = os.path.join(ROOT, "tests", "fake_bucket.py")
RUN = "gs://b/run"


@pytest.fixture
def bucket(bucket, tmp_path, monkeypatch):
    """conftest's `bucket`, with this process's local mirror (TensorBoard, train.log) under
    tmp_path too (tempfile caches the TMPDIR it read first)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return bucket


def _row(step, split="train", **values):
    return {"step": step, "split": split, **values}


def _lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def _parts(work):
    d = work / "metrics.jsonl.parts"
    return sorted(os.listdir(d)) if d.exists() else []


def _file_rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


# --------------------------------------------------------------------------- config


def test_trackers_parse_from_a_comma_string_and_are_checked():
    # ml_collections gives `--config.trackers=jsonl,tensorboard,wandb` as a 1-tuple
    t = TrainerConfig(trackers=("jsonl, tensorboard,wandb",))
    assert t.trackers == ("jsonl", "tensorboard", "wandb")
    assert TrainerConfig(trackers="jsonl").trackers == ("jsonl",)
    assert TrainerConfig().trackers == ("jsonl", "tensorboard")
    assert "trackers" in TrainerConfig.section() and "metrics_sync_s" in TrainerConfig.section()
    with pytest.raises(TrainConfigError, match=r"unknown 'mlflow' \(known: jsonl, tensorboard, wa"):
        trackers.check(("jsonl", "mlflow"))
    with pytest.raises(TrainConfigError, match="'jsonl' is required.*trackers=jsonl,tensorboard"):
        trackers.check(("tensorboard",))


def test_a_missing_wandb_is_one_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(TrainConfigError, match="'wandb' cannot start.*install the wandb extra"):
        trackers.check(("jsonl", "wandb"))


def test_a_service_that_refuses_to_start_is_one_config_error(tmp_path, monkeypatch):
    class Refusing:
        def __init__(self, workdir, **_):
            raise RuntimeError("api_key not configured (no-tty)")

    monkeypatch.setitem(trackers.TRACKERS, "wandb", Refusing)
    monkeypatch.setattr(trackers, "check", lambda names: tuple(names))  # wandb may be absent
    with pytest.raises(TrainConfigError, match="'wandb' cannot start.*api_key not configured"):
        MetricWriter(str(tmp_path), trackers=("jsonl", "wandb"))


def test_a_bad_tracker_fails_before_any_training(tmp_path, monkeypatch):
    from support.trainer import run

    with pytest.raises(TrainConfigError, match="unknown 'nope'"):
        run(tmp_path / "a", trackers=("jsonl,nope",))
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(TrainConfigError, match="'wandb' cannot start"):
        run(tmp_path / "b", trackers=("jsonl,wandb",))
    for name in ("a", "b"):  # nothing written, nothing compiled
        assert not (tmp_path / name / "checkpoints").exists()
        assert not (tmp_path / name / "config.json").exists()


def test_the_commands_refuse_an_unknown_tracker_in_one_line_before_any_work(tmp_path):
    for job, config in (("pretrain", "pretrain/cpu_small.py"), ("finetune", "finetune/tsv.py")):
        # the console script, from a directory of one's own, with the shipped config by name
        script = os.path.join(os.path.dirname(sys.executable), f"albert-{job}")
        work = tmp_path / job
        proc = subprocess.run(
            [script, "--config", config, "--workdir", str(work),
             "--config.trackers=jsonl,tensorboard,nope"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert proc.stderr.strip().splitlines() == [
            "error: trackers: unknown 'nope' (known: jsonl, tensorboard, wandb)"
        ]
        assert not work.exists()  # no corpus built, nothing written


# --------------------------------------------------------------------------- metrics.jsonl


def test_local_workdir_appends_rows_as_they_come(tmp_path):
    writer = MetricWriter(str(tmp_path), sync_every_s=0)
    writer.write(1, {"loss": 1.0})
    writer.write(2, {"loss": 2.0})
    assert _file_rows(tmp_path / "metrics.jsonl") == [_row(1, loss=1.0), _row(2, loss=2.0)]
    writer.close()
    assert not (tmp_path / "metrics.jsonl.parts").exists()
    assert glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))


def test_bucket_rows_go_in_parts_at_each_sync_and_into_metrics_jsonl_at_close(bucket):
    store, _ = bucket
    work = store / "b" / "run"
    with fake_gcs(store):
        writer = MetricWriter(RUN, sync_every_s=1e9)
        assert (work / "metrics.jsonl").read_text() == ""  # consolidated at the start
        writer.write(1, {"loss": 1.0})
        writer.write(2, {"loss": 2.0})
        writer.sync()
        writer.write(2, {"accuracy": 0.5}, prefix="eval")
        writer.sync()
        writer.sync()  # nothing new: no part
        writer.write(3, {"loss": 3.0})  # not synced
        assert writer.wait() == []
        assert _parts(work) == ["000000.jsonl", "000001.jsonl"]
        assert _file_rows(work / "metrics.jsonl.parts" / "000000.jsonl") == [
            _row(1, loss=1.0),
            _row(2, loss=2.0),
        ]
        assert glob.glob(str(work / "tensorboard" / "events.out.tfevents.*"))  # sent live
        want = [_row(1, loss=1.0), _row(2, loss=2.0), _row(2, "eval", accuracy=0.5)]
        assert read_rows(RUN) == want  # what a reader sees while the run goes on
        assert metrics.read_rows is read_rows
        writer.close()
        assert _parts(work) == [] and read_rows(RUN) == [*want, _row(3, loss=3.0)]
        assert _file_rows(work / "metrics.jsonl") == [*want, _row(3, loss=3.0)]


def test_time_based_sync_at_the_first_write_after_the_interval(bucket):
    store, _ = bucket
    with fake_gcs(store):
        writer = MetricWriter(RUN, sync_every_s=0)  # every write is past the interval
        writer.write(1, {"loss": 1.0})
        writer.write(2, {"loss": 2.0})
        writer.wait()
        assert _parts(store / "b" / "run") == ["000000.jsonl", "000001.jsonl"]
        writer.close()


def test_read_rows_dedupes_keeps_the_last_and_orders_parts_by_number(bucket):
    store, _ = bucket
    work = store / "b" / "run"
    parts = work / "metrics.jsonl.parts"
    parts.mkdir(parents=True)
    (work / "metrics.jsonl").write_text(_lines([_row(1, loss=1.0), _row(2, loss=2.0)]))
    (parts / "000010.jsonl").write_text(_lines([_row(3, loss=30.0)]))
    (parts / "000009.jsonl").write_text(_lines([_row(2, loss=20.0), _row(3, loss=3.0)]))
    (parts / ".000011.jsonl.tmp-123").write_text(_lines([_row(9, loss=9.0)]))  # half-written
    (parts / "000012.jsonl").write_text(_lines([_row(4, loss=4.0)]) + '{"step": 5, "spl')
    with fake_gcs(store):
        assert read_rows(RUN) == [
            _row(1, loss=1.0),
            _row(2, loss=20.0),
            _row(3, loss=30.0),
            _row(4, loss=4.0),
        ]
    assert read_rows(str(store / "nothing")) == []


def test_a_crash_after_metrics_jsonl_before_the_parts_went_resurrects_nothing(bucket):
    """A kill between writing metrics.jsonl and deleting the parts (at a start, resumed at step
    4): the next start reads the parts again, but the same resume rule drops their rows past
    the checkpoint and each kept row is there once."""
    store, _ = bucket
    work = store / "b" / "run"
    parts = work / "metrics.jsonl.parts"
    parts.mkdir(parents=True)
    kept = [_row(1, loss=1.0), _row(2, loss=2.0), _row(2, "eval", a=0.5), _row(4, loss=4.0)]
    (work / "metrics.jsonl").write_text(_lines(kept))  # already consolidated for step 4
    stale = [_row(2, loss=2.0), _row(4, loss=4.0), _row(4, "eval", a=0.7), _row(5, loss=5.0)]
    (parts / "000003.jsonl").write_text(_lines(stale))  # the killed run's, not yet deleted
    with fake_gcs(store):
        writer = MetricWriter(RUN, resume_step=4, sync_every_s=1e9)
        assert _parts(work) == [] and _file_rows(work / "metrics.jsonl") == kept
        writer.write(4, {"a": 0.6}, prefix="eval")
        writer.write(5, {"loss": 5.5})
        writer.sync()
        writer.wait()
        assert _parts(work) == ["000004.jsonl"]  # numbered past the leftover
        writer.close()
    assert _file_rows(work / "metrics.jsonl") == [*kept, _row(4, "eval", a=0.6), _row(5, loss=5.5)]


def test_a_failed_upload_is_retried_and_one_that_keeps_failing_is_raised_at_close(
    bucket, monkeypatch
):
    store, _ = bucket
    real = metrics._put
    broken = {"on": True}

    def put(path, data):
        if broken["on"] and "tensorboard" in os.fspath(path):
            raise OSError("bucket says no")
        real(path, data)

    monkeypatch.setattr(metrics, "_put", put)
    with fake_gcs(store):
        writer = MetricWriter(RUN, sync_every_s=1e9)
        writer.write(1, {"loss": 1.0})
        writer.sync()
        (failed,) = writer.wait()
        assert "tensorboard/events.out.tfevents" in failed[0]
        broken["on"] = False  # the next sync sends the file again
        writer.sync()
        assert writer.wait() == []
        writer.write(2, {"loss": 2.0})
        broken["on"] = True
        with pytest.raises(UploadError, match="could not copy gs://b/run/tensorboard/events.*no"):
            writer.close()
    # metrics.jsonl is still whole
    assert [r["step"] for r in _file_rows(store / "b" / "run" / "metrics.jsonl")] == [1, 2]


# --------------------------------------------------------------------------- a bucket run, live


def _worker(store, spec, env=None):
    """`tests/trainer_worker.py SPEC` (the synthetic task) with the fake bucket, as a process."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "tests"), ROOT])
    cmd = [sys.executable, FAKE, str(store), "-m", "trainer_worker", json.dumps(spec)]
    return cmd, env


@pytest.mark.slow  # two short trainer processes (~35 s on two busy cores)
def test_a_bucket_run_shows_its_metrics_live_and_a_kill_loses_only_the_unsynced(bucket):
    """A run checkpointed at step 3, then stalled (its input sleeps at batch 5, fetched after
    step 5 ran, before that step's row) has its rows to step 3, TensorBoard events and train.log
    in the bucket, seen from this process while it is stopped; step 4's row, logged after that
    sync (its TensorBoard event is in the local mirror), is not there. Killed with SIGKILL and
    rerun, it ends with each row of metrics.jsonl exactly once and no part files."""
    from test_trainer import _tb_events

    store, cwd = bucket
    work = store / "b" / "run"
    events = os.path.join(paths.local_mirror(RUN), "tensorboard")  # the run's TMPDIR is ours
    config = {"total_steps": 6, "checkpoint_every": 3, "log_every": 1, "metrics_sync_s": 1e9}
    cmd, env = _worker(store, {"workdir": RUN, "config": config, "sleep_from": 5})
    log = cwd / "first.out"

    def logged_locally(step):
        return os.path.isdir(events) and ("train/loss", step) in {
            (tag, s) for tag, s, _ in _tb_events(events)[1]
        }

    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            with fake_gcs(store):
                while not (any(r["step"] == 3 for r in read_rows(RUN)) and logged_locally(4)):
                    assert proc.poll() is None, log.read_text()[-3000:]
                    assert time.monotonic() < deadline, log.read_text()[-3000:]
                    time.sleep(0.2)
                time.sleep(1.0)
                rows = read_rows(RUN)
            assert [(r["step"], r["split"]) for r in rows] == [
                (s, k) for s in (1, 2, 3) for k in ("train", "goodput")
            ]
            assert _parts(work) == ["000000.jsonl"] and not (work / "metrics.jsonl").read_text()
            _, sent = _tb_events(str(work / "tensorboard"))
            assert {s for tag, s, _ in sent if tag == "train/loss"} == {1, 2, 3}
            assert (work / "train.log").stat().st_size > 0
            assert proc.poll() is None  # all of it seen while the run is stopped
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    cmd, env = _worker(store, {"workdir": RUN, "config": config})
    again = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from step 3" in again.stdout
    rows = _file_rows(work / "metrics.jsonl")
    assert [(r["step"], r["split"]) for r in rows] == [
        (s, k) for s in range(1, 7) for k in ("train", "goodput")
    ]
    assert _parts(work) == []
    assert len(glob.glob(str(work / "tensorboard" / "events.out.tfevents.*"))) == 2  # two runs


# --------------------------------------------------------------------------- Weights & Biases


@pytest.mark.slow  # wandb's service starts twice (~30 s)
def test_wandb_offline_writes_its_run_and_a_resumed_run_continues_it(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from support.trainer import run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    work = tmp_path / "run"
    config = {"trackers": ("jsonl,tensorboard,wandb",), "total_steps": 2}
    run(work, **config)
    run(work, **{**config, "total_steps": 4})  # resumed from step 2
    run_id = trackers.wandb_run_id(str(work))
    found = sorted(glob.glob(str(tmp_path / "wandb_dir" / "wandb" / "offline-run-*")))
    assert len(found) == 2 and all(d.endswith(f"-{run_id}") for d in found), found
    for d in found:
        (data,) = glob.glob(os.path.join(d, f"run-{run_id}.wandb"))
        with open(data, "rb") as f:
            assert b"train/loss" in f.read()
    rows = _file_rows(work / "metrics.jsonl")
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3, 4]

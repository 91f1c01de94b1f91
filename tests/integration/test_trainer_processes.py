"""The trainer in processes of its own (tests/trainer_worker.py on fake CPU devices): SIGKILL
after a checkpoint then a resume reproduces the straight run bitwise, SIGTERM saves a checkpoint
and exits 0, and two processes of two devices each match the single-process run, resumed too
(the `straight` reference run is tests/conftest.py's)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from support import ROOT
from support.trainer import (
    EXACT_KEYS,
    N,
    assert_trees_equal,
    ckpt_steps,
    load_state,
    read_metrics,
    run,
)

WORKER = os.path.join(ROOT, "tests", "trainer_worker.py")


def child_env(devices=8):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count={devices} --xla_backend_optimization_level=0"
    )
    env["JAX_PLATFORMS"] = "cpu"
    return env


def spawn_worker(spec):
    """tests/trainer_worker.py in a subprocess on 8 fake devices, output captured."""
    return subprocess.Popen(
        [sys.executable, WORKER, json.dumps(spec)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_checkpoint(workdir, step, proc, timeout=240):
    """Until checkpoints/<step> exists under its final name with its commit marker."""
    marker = os.path.join(workdir, "checkpoints", str(step), "commit_success.txt")
    t0 = time.monotonic()
    while not os.path.exists(marker):
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.stdout.read()}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError("no checkpoint in time")
        time.sleep(0.2)


@pytest.mark.slow
def test_resume_after_sigkill_is_bit_exact(straight, tmp_path):
    """A worker training to 6 stalls in its data pipeline after step 4 and is SIGKILLed once
    checkpoint 4 is committed; resuming here to 6 reproduces the straight run bitwise."""
    straight_dir, _ = straight
    spec = {"workdir": str(tmp_path), "config": {"total_steps": N}, "sleep_from": 4}
    proc = spawn_worker(spec)
    try:
        _wait_for_checkpoint(str(tmp_path), 4, proc)
        time.sleep(0.5)
        assert proc.poll() is None, "worker should still be alive (stalled before step 5)"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert ckpt_steps(tmp_path) == [2, 4]
    run(tmp_path, total_steps=N)
    assert_trees_equal(load_state(tmp_path, N), load_state(straight_dir, N))
    a, b = read_metrics(tmp_path), read_metrics(straight_dir)
    for s in (5, 6):
        for k in EXACT_KEYS:
            assert a[s][k] == b[s][k], (s, k)


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    """Preemption: SIGTERM mid-run -> a checkpoint at the step reached, exit code 0."""
    spec = {"workdir": str(tmp_path), "config": {"total_steps": 200}, "delay_from": 2}
    proc = spawn_worker(spec)
    try:
        _wait_for_checkpoint(str(tmp_path), 2, proc)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    assert "SIGTERM received" in out
    steps = ckpt_steps(tmp_path)
    last = max(steps)
    assert 2 < last < 200, steps  # saved where it stopped, long before the end
    assert last == max(read_metrics(tmp_path)), "the final checkpoint is the last step trained"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(workdir, total_steps):
    port = _free_port()
    procs = []
    for i in range(2):
        cfg = {
            "total_steps": total_steps,
            "optim.total_steps": N,
            "distributed.enabled": True,
            "distributed.coordinator_address": f"127.0.0.1:{port}",
            "distributed.num_processes": 2,
            "distributed.process_id": i,
        }
        spec = {"workdir": str(workdir), "config": cfg}
        procs.append(
            subprocess.Popen(
                [sys.executable, WORKER, json.dumps(spec)],
                env=child_env(devices=2),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        outs.append(out)
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]
    return outs


@pytest.mark.slow
def test_two_processes_match_single_process_and_resume(straight, tmp_path):
    """2 processes x 2 fake devices (mesh data=4): steps 1-4, then a resumed 5-6 from the jointly
    written checkpoint 4; losses agree with the 8-device single-process run to 1e-5 relative."""
    straight_dir, _ = straight
    outs = _two_processes(tmp_path, 4)
    assert "2 process(es)" in outs[0]
    assert ckpt_steps(tmp_path) == [2, 4]
    assert os.path.exists(tmp_path / "checkpoints" / "4" / "data" / "process_1-of-2.json")
    outs = _two_processes(tmp_path, N)
    assert "resumed from step 4" in outs[0]
    rows, ref = read_metrics(tmp_path), read_metrics(straight_dir)
    assert sorted(rows) == list(range(1, N + 1))
    for s in range(1, N + 1):
        for k in ("loss", "mlm_loss", "sop_loss", "grad_norm"):
            np.testing.assert_allclose(rows[s][k], ref[s][k], rtol=1e-5, err_msg=f"{s} {k}")

"""The benchmark scripts still run and report what their docstrings promise (slow: each compiles
a few steps). Their figures are not asserted: speed targets live in the benchmarks themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(*args):
    cmd = [sys.executable, os.path.join(REPO, "benchmarks", "train_step.py"), "--size", "tiny"]
    cmd += ["--batch", "2", "--seq", "16", "--preds", "3", "--vocab", "500", "--steps", "1"]
    cmd += ["--warmup", "0", *args]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device, as a user has
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_train_step_reports_every_configuration_against_its_peak():
    result = bench("--objectives", "mlm+sop,electra", "--layouts", "all,none", "--dtypes",
                   "float32,bfloat16")  # fmt: skip
    rows = result["ours"]
    combos = {(r["objective"], r["layout"], r["dtype"], r["scan_layers"]) for r in rows}
    assert len(rows) == len(combos) == 2 * 2 * 2
    peaks = result["matmul_peak_tflops"]
    for r in rows:
        assert r["step_s"] > 0 and r["xla_gflops"] > 0 and r["loss"] > 0
        assert r["mfu"] == pytest.approx(r["model_tflops_per_s"] / peaks[r["dtype"]], rel=0.05)
    electra = {r["loss"] for r in rows if r["objective"] == "electra"}
    assert min(electra) > max(r["loss"] for r in rows if r["objective"] == "mlm+sop")  # + 50 x BCE


@pytest.mark.slow
def test_inference_compares_shared_and_unshared_at_equal_flops():
    rows = bench("--inference", "--layouts", "all,none")["ours"]
    assert [r["layout"] for r in rows] == ["all", "none"]
    assert rows[0]["xla_gflops"] == rows[1]["xla_gflops"]  # sharing saves parameters, not FLOPs


@pytest.mark.slow
def test_bf16_curve_runs_the_readme_command_twice_and_compares(tmp_path):
    """benchmarks/bf16_curve.py: the pretraining CLI in float32 and bfloat16 on one corpus, the
    same logged steps, the gap reported and held to the tolerance."""
    script = os.path.join(REPO, "benchmarks", "bf16_curve.py")
    cmd = [sys.executable, script, "--steps", "20", "--log-every", "5", "--workdir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert [c["step"] for c in result["curve"]] == [5, 10, 15, 20]
    for c in result["curve"]:
        assert c["float32"] != c["bfloat16"]  # two precisions did run
        assert c["gap"] == pytest.approx(c["bfloat16"] - c["float32"])
    assert result["within_tolerance"] and result["max_rel_gap"] <= 1e-3
    for dtype in ("float32", "bfloat16"):
        with open(tmp_path / dtype / "config.json") as f:
            assert json.load(f)["model"]["dtype"] == dtype

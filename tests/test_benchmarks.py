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
    ablation = result["none_over_all"]  # one ratio per objective x dtype (x scan) per round
    assert len(ablation) == 2 * 2
    for r in (r for r in rows if r["layout"] == "none"):
        (shared,) = [a for a in rows if a["layout"] == "all" and all(a[k] == r[k] for k in
                     ("objective", "dtype", "scan_layers", "round"))]  # fmt: skip
        name = f"{r['objective']} none {r['dtype']} scan remat=none"
        assert ablation[name]["rounds"] == [round(r["step_s"] / shared["step_s"], 3)]
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


@pytest.mark.slow
def test_memory_finds_the_largest_batch_under_the_budget():
    """benchmarks/memory.py: XLA's footprint of the compiled step, remat lowering the activations
    kept, and a largest batch that fits the budget while the next probe above it does not."""
    script = os.path.join(REPO, "benchmarks", "memory.py")
    cmd = [sys.executable, script, "--size", "tiny", "--seq", "32", "--vocab", "500", "--preds",
           "4", "--layouts", "all", "--remat", "none,full", "--budget-gb", "0.06"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    none, full = json.loads(done.stdout)["rows"]
    assert full["temp_gb"] < none["temp_gb"]  # remat keeps fewer activations
    assert full["largest_batch"] >= none["largest_batch"] > 0
    for row in (none, full):
        fit = [p for p in row["probes"] if p["total_gb"] <= 0.06]
        over = [p for p in row["probes"] if p["total_gb"] > 0.06]
        assert max(p["batch"] for p in fit) == row["largest_batch"]
        assert min(p["batch"] for p in over) > row["largest_batch"]
        gap = min(p["batch"] for p in over) - row["largest_batch"]
        assert gap <= max(1, row["largest_batch"] // 16)  # bisected to within ~6 %

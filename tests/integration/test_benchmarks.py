"""The benchmark scripts still run and report what their docstrings promise (slow: each compiles
a few steps; the one that imports a script instead is fast). Figures are not asserted: speed
targets live in the benchmarks themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench(*args):
    cmd = [sys.executable, os.path.join(REPO, "benchmarks", "train_step.py"), "--size", "tiny"]
    cmd += ["--batch", "2", "--seq", "16", "--preds", "3", "--vocab", "500", "--steps", "1"]
    cmd += ["--warmup", "0", *args]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device, as a user has
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


FAKE_PEER = """import json, sys
assert sys.argv[1:3] == ["--impl", "hf_flax"], sys.argv
print("peer log line")
print(json.dumps({"impl": "hf_flax", "step_s": 2.5}))
"""


@pytest.mark.slow
def test_train_step_reports_every_configuration_against_its_peak(tmp_path):
    peer = tmp_path / "peer.py"  # stands in for ../shared/peer/peer_bench.py: a known step time
    peer.write_text(FAKE_PEER)
    result = bench("--objectives", "mlm+sop,electra", "--layouts", "all,none", "--dtypes",
                   "float32,bfloat16", "--peer", "hf_flax", "--peer-script", str(peer))  # fmt: skip
    rows = result["ours"]
    assert result["peer"] == [{"impl": "hf_flax", "step_s": 2.5, "round": 0}]
    for name, over in (("peer_step_over_ours", "step_s"), ("peer_step_over_step_at_peak",
                                                          "step_at_peak_s")):  # fmt: skip
        by_config = result[name]
        assert len(by_config) == len(rows)
        for r in rows:
            name = f"{r['objective']} {r['layout']} {r['dtype']} scan remat=none"
            assert by_config[name]["rounds"] == [round(2.5 / r[over], 3)]
    for r in rows:  # the model FLOPs at the peak take the step's time times its MFU
        assert r["step_at_peak_s"] == pytest.approx(r["mfu"] * r["step_s"], rel=0.02)
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


ACCELERATOR_KEYS = {
    "step_s", "mfu", "peak_bf16_tflops", "peak_memory_gb", "model_tflops_per_s", "backend",
    "device_kind", "jax", "git_commit", "attention_impl", "attention_impl_resolved",
    "matmul_grad", "matmul_grad_resolved", "loss",
}  # fmt: skip


@pytest.mark.slow
def test_accelerator_step_runs_on_cpu_and_reports_its_keys(tmp_path):
    """benchmarks/accelerator_step.py --size tiny --steps 2 on CPU: the JSON on stdout and in
    --out, the switches as set and as resolved, and the device-only figures null here."""
    script = os.path.join(REPO, "benchmarks", "accelerator_step.py")
    out = tmp_path / "accelerator.json"
    cmd = [sys.executable, script, "--size", "tiny", "--steps", "2", "--batch", "2", "--seq",
           "16", "--preds", "3", "--vocab", "500", "--warmup", "0", "--attention-impl", "fused",
           "--out", str(out)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert json.loads(out.read_text()) == result
    assert ACCELERATOR_KEYS <= set(result)
    assert (result["backend"], result["attention_impl"], result["matmul_grad"]) == (
        "cpu", "fused", "auto")  # fmt: skip
    assert result["attention_impl_resolved"] == "fused"
    assert result["matmul_grad_resolved"] == "custom"  # auto on CPU
    assert result["mfu"] is result["peak_bf16_tflops"] is result["peak_memory_gb"] is None
    assert result["step_s"] > 0 and result["loss"] > 0 and result["model_tflops_per_s"] > 0
    if os.path.exists(os.path.join(REPO, ".git")):  # not in mutants.py's copies
        assert len(result["git_commit"].split("+")[0]) == 40


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
            assert json.load(f)["execution"]["dtype"] == dtype


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


def memory_json(*args):
    script = os.path.join(REPO, "benchmarks", "memory.py")
    cmd = [sys.executable, script, "--size", "tiny", "--seq", "32", "--vocab", "500", "--preds",
           "4", "--layouts", "all", "--remat", "none", "--budget-gb", "0.05", *args]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_memory_is_per_chip_over_a_mesh():
    """`--mesh`: the step partitioned over host devices as the trainer's mesh_shape places it. FSDP
    splits the state over chips (arguments about halve), data parallelism does not; the batch is
    per chip, so a chip's activations stay those of `--batch` sequences whatever the mesh."""
    one, fsdp, data = (memory_json("--mesh", m) for m in ("1,1,1", "1,2,1", "2,1,1"))
    assert fsdp["mesh"] == {"data": 1, "fsdp": 2, "tensor": 1} and fsdp["batch_per_chip"] == 8
    (one,), (fsdp,), (data,) = one["rows"], fsdp["rows"], data["rows"]
    assert fsdp["arguments_gb"] == pytest.approx(one["arguments_gb"] / 2, rel=0.15)
    assert data["arguments_gb"] == pytest.approx(one["arguments_gb"], rel=0.05)
    assert data["temp_gb"] == pytest.approx(one["temp_gb"], rel=0.15)  # + the gradient all-reduce
    assert fsdp["largest_batch"] >= one["largest_batch"] > 0  # the freed state holds more
    for bad in ("2,0,1", "2,x,1", "2,1"):
        with pytest.raises(AssertionError, match=f"--mesh {bad}: expected three positive sizes"):
            memory_json("--mesh", bad)


@pytest.mark.slow
def test_host_overhead_times_the_loop_against_the_bare_step():
    """benchmarks/host_overhead.py: the trainer's loop and the bare step, per step, in wall, CPU
    and loop-thread time; the loop's figures over the step's; medians over the rounds."""
    script = os.path.join(REPO, "benchmarks", "host_overhead.py")
    cmd = [sys.executable, script, "--steps", "20", "--log-every", "5", "--rounds", "1"]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout is the JSON alone: train()'s lines go to stderr
    (r,) = result["rounds"]
    assert result["steps"] == 20 and result["log_every"] == 5 and result["code"]
    for part in ("device", "every_step", "log_steps"):
        assert result["median"][part] == r[part]
        assert all(r[part][k] > 0 for k in ("wall_s", "cpu_s", "thread_s")), r[part]
    for part in ("every_step", "log_steps"):
        for k in ("wall", "cpu", "thread"):
            want = r[part][f"{k}_s"] - r["device"][f"{k}_s"]
            assert r[part][f"host_{k}_s"] == pytest.approx(want)


def test_stacked_layers_variants_compute_the_same_gradient():
    """benchmarks/stacked_layers.py times five layouts of one computation: they must agree, or the
    timings compare different programs (the `unstack` custom_vjp's backward included)."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import stacked_layers
    finally:
        sys.path.pop(0)
    L, H, inter = 3, 8, 16
    key = jax.random.key(0)
    shapes = {"wq": (H, H), "wo": (H, H), "w1": (H, inter), "w2": (inter, H)}
    stacked = {n: jax.random.normal(jax.random.fold_in(key, i), (L, *s)) * 0.3
               for i, (n, s) in enumerate(shapes.items())}  # fmt: skip
    x = jax.random.normal(key, (4, H))
    grads = {}
    for name, f in stacked_layers.make_variants(L).items():
        if name == "separate":
            g = jax.grad(f)([{n: v[i] for n, v in stacked.items()} for i in range(L)], x)
            g = {n: jnp.stack([layer[n] for layer in g]) for n in shapes}
        else:
            g = jax.grad(f)(stacked, x)
        grads[name] = g
    assert set(grads) == {"separate", "slice", "unstack", "scan", "scan_unrolled"}
    for name, g in grads.items():
        for n in shapes:
            assert float(jnp.abs(g[n]).max()) > 0, (name, n)
            err = float(jnp.abs(g[n] - grads["separate"][n]).max())
            assert err <= 1e-5 * float(jnp.abs(grads["separate"][n]).max()), (name, n, err)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("ALBERT_JAX_REF5_PYTHON"),
    reason="the peer's python (transformers 5 + torch): ALBERT_JAX_REF5_PYTHON, as CI sets it",
)
def test_peer_training_runs_both_sides_from_one_start(tmp_path):
    """peer_training.py on a tiny model and dataset: both sides start from the same weights
    (the peer's logits equal ours), train the same steps and score the same dev sample at the
    same steps; the comparison takes the lower best accuracy as the target."""
    data = tmp_path / "data"
    data.mkdir()
    words = {"pos": "好 棒 喜欢 满意", "neg": "差 坏 讨厌 失望"}
    for split, n in (("train", 64), ("dev", 32), ("test", 8)):
        with open(data / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n):
                label = ("pos", "neg")[i % 2]
                text = f"这个{words[label].split()[i % 4]}的东西{i}"
                f.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")
    out = tmp_path / "peer.json"
    cmd = [sys.executable, os.path.join(REPO, "benchmarks", "peer_training.py"), "--size", "tiny",
           "--config", "configs/finetune/sentiment.py", "--data", str(data), "--steps", "4",
           "--eval-every", "2", "--dev-sample", "16", "--batch", "8", "--seq", "16",
           "--vocab-size", "60", "--head-lr", "10", "--workdir", str(tmp_path / "work"),
           "--peer-python", os.environ["ALBERT_JAX_REF5_PYTHON"], "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["peer"]["parity_max_abs_logit_diff"] < 1e-4
    for side in ("ours", "peer"):
        assert [e["step"] for e in result[side]["evals"]] == [2, 4]
        assert result[side]["examples_per_s"] > 0
    compare = result["comparison"]
    assert compare["target_accuracy"] == min(compare["best_accuracy"].values())
    assert result["data"] == {**result["data"], "dev_sample": 16, "train_examples": 64}

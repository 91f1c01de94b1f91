"""`python -m pretrain.compile` for TPU topologies as a user types it (skipped without libtpu:
`uv sync --extra tpu`; CI installs it): the report of a 4-chip slice, gradient reductions once
per step whatever the accumulation, a program that does not fit refused in one line; and a
training process filling the compilation cache it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import ROOT
from support.tpu import needs_libtpu


def compile_cli(*args, timeout=600):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    return subprocess.run(
        [sys.executable, "-m", "pretrain.compile", "--config", "configs/pretrain/cpu_small.py",
         *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@needs_libtpu
@pytest.mark.slow  # two compiles per topology, ~40 s each on 2 cores
@pytest.mark.parametrize("name", ["v5e:2x2", "v4:2x2x1"])
def test_compile_command_for_a_tpu_topology(name, tmp_path):
    """As a user types it: a tiny config for a 4-chip slice, data x fsdp, 2 micro-batches. The
    report is the TPU compiler's: TPU devices, memory against the chip's HBM, collectives within
    2x of the mesh's minimum, and the largest batch that fits above the one compiled."""
    out = tmp_path / "report.json"
    proc = compile_cli(
        "--topology", name, "--config.mesh_shape=2,2,1", "--config.grad_accum_steps=2",
        "--config.data.global_batch_size=256", "--config.data.max_seq_length=128",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report == json.loads(out.read_text())
    assert report["chips"] == 4 and "TPU" in report["device_kind"]
    assert report["mesh"] == {"data": 2, "fsdp": 2, "tensor": 1}
    mem = report["memory"]
    assert mem["fits"] and 0 < mem["total_gib"] < mem["hbm_gib"]
    assert report["collective_over_minimum"] <= 2.0
    assert report["collective_time_s"] > 0 and report["flops_time_s"] > 0
    assert report["largest_batch_per_chip"] > report["batch_per_chip"]
    assert "per chip:" in proc.stderr and "fits" in proc.stderr


@needs_libtpu
@pytest.mark.slow  # two TPU compiles, ~35 s (the host-device count test above is the fast guard)
def test_compile_command_counts_reductions_once_per_step():
    """The TPU program's gradient reductions do not grow with the micro-batches: a reduction
    inside the accumulation loop (the partitioner's placement) would multiply them by 4."""
    runs = []
    for accum in (1, 4):
        proc = compile_cli(
            "--topology", "v5e:2x2", "--config.mesh_shape=4,1,1",
            f"--config.grad_accum_steps={accum}", "--largest_batch=false",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout)["collectives"])
    for kind in ("all-reduce", "reduce-scatter"):
        assert runs[1][kind]["executed"] == runs[0][kind]["executed"], kind
    assert runs[0]["all-reduce"]["executed"] > 0


@needs_libtpu
def test_compile_command_refuses_what_does_not_fit():
    proc = compile_cli(
        "--topology", "v5e:2x2", "--config.mesh_shape=4,1,1", "--config.execution.remat=none",
        "--config.data.global_batch_size=16384", "--config.data.max_seq_length=512",
        "--config.model.max_position_embeddings=512", "--largest_batch=false",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: does not fit:") and "grad_accum_steps" in last
    assert json.loads(proc.stdout)["memory"]["fits"] is False


@pytest.mark.slow  # two training processes, ~30 s
def test_compilation_cache_is_written_where_configured(tmp_path):
    """A run given compilation_cache_dir fills it (in a fresh process: JAX keeps one cache a
    process); on CPU nothing is cached unless named."""
    cache = tmp_path / "cache"
    for workdir, extra in (("named", {"compilation_cache_dir": str(cache)}), ("default", {})):
        spec = {"workdir": str(tmp_path / workdir), "config": {"total_steps": 2, **extra}}
        env = dict(os.environ, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        worker = os.path.join(ROOT, "tests", "trainer_worker.py")
        proc = subprocess.run(
            [sys.executable, worker, json.dumps(spec)], env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert any(cache.iterdir())
    assert not (tmp_path / "default" / "compilation_cache").exists()

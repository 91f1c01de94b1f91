"""The pretraining train step on a GPU or TPU, with the accelerator path's switches as flags: its
median step, MFU against the device's peak bf16 FLOP/s and its peak device memory.

    python benchmarks/accelerator_step.py --size base                 # auto: fused + autodiff
    python benchmarks/accelerator_step.py --size base --attention-impl explicit --matmul-grad custom
    python benchmarks/accelerator_step.py --size large --batch 64 --seq 512 --remat save_dots
    python benchmarks/accelerator_step.py --size tiny --steps 2       # on CPU too

The step is train_step.py's (`measure_round`: the trainer's jitted step of the MLM+SOP task with
ALBERT's LAMB, state donated, one device, a fixed random batch) for one configuration, with
`--attention-impl` (auto | fused | explicit) and `--matmul-grad` (auto | custom | autodiff)
reported as set and as resolved on this backend (`albert_jax.model.albert.resolve_attention`,
`resolve_matmul_grad`). MFU = model FLOP/s (`albert_jax.model.flops` through the task: matmuls,
every layer application) over `PEAK_BF16_FLOPS` of `jax.devices()[0].device_kind`, the dense
bf16 peak whatever `--dtype`; null when the kind is not in the table (CPUs among them). Peak
memory: the device's `peak_bytes_in_use` after the steps, null where `memory_stats` has none
(CPU). One JSON document on stdout, and in `--out FILE`.
"""

from __future__ import annotations

import os
import subprocess

import flax
import jax
import jaxlib
from report import emit  # benchmarks/ on sys.path
from train_step import (  # benchmarks/ on sys.path
    REPO,
    execution_for,
    measure_round,
    peak_memory_gb,
    step_parser,
    step_shape,
)

from albert_jax import cli
from albert_jax.model.albert import resolve_attention, resolve_matmul_grad

# Dense (not sparse) bf16 peak FLOP/s per chip, from the vendors' data sheets, by a fragment of
# `device_kind`; the first fragment the kind contains wins (H100 PCIe before H100).
PEAK_BF16_FLOPS = (
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100", 989e12),  # SXM
    ("A100", 312e12),
    ("TPU v4", 275e12),
    ("TPU v5 lite", 197e12),  # v5e
    ("TPU v5", 459e12),  # v5p
    ("TPU v6 lite", 918e12),  # v6e (Trillium)
)


def peak_bf16_flops(device_kind: str) -> float | None:
    return next((peak for frag, peak in PEAK_BF16_FLOPS if frag in device_kind), None)


def git_commit() -> str | None:
    """The checkout's commit, with '+dirty' when tracked files differ from it; None without git."""
    try:
        run = lambda *a: subprocess.run(  # noqa: E731
            ["git", *a], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        return run("rev-parse", "HEAD") + ("+dirty" if run("status", "--porcelain", "-uno") else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    p = step_parser(__doc__, batch=32, steps=10, warmup=2)
    p.add_argument("--layout", default="all", help="all, attention, ffn, none, groups:G")
    p.add_argument("--dtype", default="bfloat16", help="compute dtype: bfloat16 or float32")
    p.add_argument("--scan", default="true", choices=("true", "false"))
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args()
    args.inference = False  # measure_round's train step

    setting = ("mlm+sop", args.layout, args.dtype, args.scan == "true")
    (row,) = measure_round(args, [setting])
    execution = execution_for(args, *setting[2:])
    row["attention_impl_resolved"] = resolve_attention(execution, 0.0)  # dropout 0: this step's
    row["matmul_grad_resolved"] = resolve_matmul_grad(execution)
    device = jax.devices()[0]
    peak = peak_bf16_flops(device.device_kind)
    flops_per_s = row["model_tflop"] * 1e12 / row["step_s"]
    emit(
        {
            "benchmark": "accelerator_step",
            **step_shape(args),
            **row,
            "peak_bf16_tflops": None if peak is None else peak / 1e12,
            "mfu": None if peak is None else round(flops_per_s / peak, 4),
            "peak_memory_gb": peak_memory_gb(),
            "backend": jax.default_backend(),
            "device_kind": device.device_kind,
            "device_count": jax.device_count(),
            "jax": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "flax": flax.__version__,
            "git_commit": git_commit(),
            "host_memory_kept": kept,
            "cpus": os.cpu_count(),
        },
        args.out,
    )


if __name__ == "__main__":
    main()

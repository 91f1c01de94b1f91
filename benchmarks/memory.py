"""Memory of a pretraining train step per chip, with and without remat, and the largest batch per
chip that fits a budget, from XLA's own memory analysis of the compiled step (nothing is run, so it
answers for sizes and chip counts this machine could not execute).

    python benchmarks/memory.py --size base --seq 512 --budget-gb 16
    python benchmarks/memory.py --size large --budget-gb 80 --layouts all --remat none,full
    python benchmarks/memory.py --size xxlarge --dtypes bfloat16 --remat save_dots \
        --mesh 1,16,1 --batch 32 --budget-gb 32       # configs/pretrain/tpu_pod.py, per chip

Per configuration (layout x dtype x remat, scanned encoder unless `--scan false`): at `--batch`
sequences per chip, the compiled step's arguments (train state and batch), temporaries
(activations kept for the backward pass, gradients, workspace) and total on one chip, then the
largest batch per chip whose total fits `--budget-gb`, found by doubling then bisection over
compiled steps. `--mesh data,fsdp,tensor` compiles the step SPMD-partitioned over that many
devices as the trainer's `mesh_shape` places it (parameters and optimizer state split over 'fsdp'
and 'tensor', the batch over 'data' x 'fsdp', so the global batch is `--batch` x data x fsdp); on
a CPU it makes that many host devices (their compiler, not a TPU's: `pretrain.compile` has a TPU
topology's). The step is the trainer's (`trainer.compile_task`: donated state) of the MLM+SOP
task with ALBERT's LAMB. On a GPU or TPU `--run` also executes the step at `--batch` and reports
the device's `peak_bytes_in_use`. One JSON document.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import jax
import numpy as np
from finetune_step import compiled_task  # benchmarks/ on sys.path
from report import emit
from train_step import (  # benchmarks/ on sys.path
    add_accelerator_args,
    execution_for,
    make_batch,
    make_task_for,
    model_config,
    peak_memory_gb,
    run_config,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # configs/

from albert_jax.train import partitioning, trainer  # noqa: E402

GB = 1e9


def compiled_step(args, layout: str, dtype: str, remat: str, batch: int):
    """The trainer's train step (`compiled_task`) lowered and compiled for `batch` sequences per
    chip (the global batch is that times the batch shards of `args.mesh`), on abstract inputs."""
    batch *= partitioning.batch_shards(dict(zip(partitioning.MESH_AXES, args.mesh, strict=True)))
    args = argparse.Namespace(**{**vars(args), "batch": batch, "remat": remat})
    config = run_config(args, "mlm+sop")
    execution = execution_for(args, dtype, args.scan == "true")
    task = make_task_for(config, model_config(args, layout), execution)
    run = compiled_task(config, task.job(), args.mesh)
    data = make_batch(args.vocab, batch, args.seq, args.preds)
    spec = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in data.items()}
    return run.lower(spec).compile(), (run, data)


def footprint(compiled) -> dict:
    """One chip's bytes: an SPMD-partitioned program's analysis is of one device's program."""
    m = compiled.memory_analysis()
    total = m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
    total -= m.alias_size_in_bytes  # the donated state is written in place
    return {
        "arguments_gb": round(m.argument_size_in_bytes / GB, 3),
        "temp_gb": round(m.temp_size_in_bytes / GB, 3),
        "total_gb": round(total / GB, 3),
    }


def largest_batch(args, layout, dtype, remat) -> tuple[int, list]:
    """Largest batch per chip whose compiled total fits the budget (0 if not even 1), and the
    probes."""
    probes = []

    def fits(b):
        total = footprint(compiled_step(args, layout, dtype, remat, b)[0])["total_gb"]
        probes.append({"batch": b, "total_gb": total})
        return total <= args.budget_gb

    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > args.max_batch:
            return lo, probes
    while hi - lo > max(1, lo // 16):  # to within ~6 %
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo, probes


def run_once(built) -> float | None:
    """Execute the step once; the device's peak bytes in use (None on CPU)."""
    run, data = built
    with run.scope():
        state = run.init_fn(jax.random.key(0))
        batch = trainer.global_batch(data, run.mesh)
        jax.block_until_ready(run.step_fn(state, batch))
    return peak_memory_gb()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="base")
    p.add_argument("--batch", type=int, default=8, help="sequences per chip for the footprint")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--preds", type=int, default=20)
    p.add_argument("--vocab", type=int, default=30000)
    p.add_argument("--layouts", default="all,none")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--remat", default="none,save_dots,full")
    p.add_argument("--scan", default="true", choices=("true", "false"))
    add_accelerator_args(p)
    p.add_argument("--budget-gb", type=float, default=16.0)
    p.add_argument("--max-batch", type=int, default=4096)
    p.add_argument("--run", action="store_true", help="also run the step (peak bytes on GPU/TPU)")
    p.add_argument(
        "--mesh", default="1,1,1", help="data,fsdp,tensor devices (trainer's mesh_shape)"
    )
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args()
    sizes = args.mesh.split(",")
    if len(sizes) != 3 or not all(n.isdigit() and int(n) > 0 for n in sizes):
        p.error(f"--mesh {args.mesh}: expected three positive sizes data,fsdp,tensor")
    args.mesh = tuple(int(n) for n in sizes)
    if math.prod(args.mesh) > 1:  # host devices to partition over; GPUs/TPUs are what they are
        jax.config.update("jax_num_cpu_devices", math.prod(args.mesh))
    rows = []
    for layout in args.layouts.split(","):
        for dtype in args.dtypes.split(","):
            for remat in args.remat.split(","):
                compiled, built = compiled_step(args, layout, dtype, remat, args.batch)
                row = {"layout": layout, "dtype": dtype, "remat": remat, **footprint(compiled)}
                if args.run:
                    row["peak_bytes_in_use_gb"] = run_once(built)
                row["largest_batch"], row["probes"] = largest_batch(args, layout, dtype, remat)
                rows.append(row)
                print({k: v for k, v in row.items() if k != "probes"}, file=sys.stderr, flush=True)
    emit(
        {
            "benchmark": "memory",
            "size": args.size,
            "seq": args.seq,
            "batch_per_chip": args.batch,
            "mesh": dict(zip(partitioning.MESH_AXES, args.mesh, strict=True)),
            "budget_gb": args.budget_gb,
            "scan_layers": args.scan == "true",
            "attention_impl": args.attention_impl,
            "matmul_grad": args.matmul_grad,
            "backend": jax.default_backend(),
            "device": str(jax.devices()[0].device_kind),
            "jax": jax.__version__,
            "numpy": np.__version__,
            "rows": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()

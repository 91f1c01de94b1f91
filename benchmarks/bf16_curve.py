"""Does bf16 compute train like float32? The README's pretraining command run twice on the same
data and seed, float32 and `--config.execution.dtype=bfloat16`, and their logged training losses
compared step by step.

    python benchmarks/bf16_curve.py          # 100 steps of configs/pretrain/cpu_small.py
    python benchmarks/bf16_curve.py --steps 300 --workdir /tmp/bf16_curve --tolerance 1e-4

Both runs are `python -m pretrain` as a user types it (`--config.total_steps`, logging every
`--log-every` steps, one tokenized corpus shared under WORKDIR/data), so they see the same batches
in the same order; only the precision of the matmuls differs. Reported: the two curves, the largest
absolute and relative gap between them, the gap over the last quarter, and the step time of each.
Exit status 1 when the largest relative gap exceeds `--tolerance`. One JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from report import emit  # benchmarks/ on sys.path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, dtype: str) -> list[dict]:
    workdir = os.path.join(args.workdir, dtype)
    cmd = [
        sys.executable,
        "-m",
        "pretrain",
        "--config",
        args.config,
        "--workdir",
        workdir,
        f"--config.execution.dtype={dtype}",
        f"--config.total_steps={args.steps}",
        f"--config.optim.warmup_steps={max(1, args.steps // 10)}",
        f"--config.log_every={args.log_every}",
        f"--config.eval_every={args.steps}",
        f"--config.checkpoint_every={args.steps}",
        f"--config.data.data_dir={os.path.abspath(os.path.join(args.workdir, 'data'))}",
        "--config.progress_bar=False",
    ]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [r for r in rows if r.get("split") == "train"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/pretrain/cpu_small.py")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--workdir", default="runs/bf16_curve", help="a fresh one starts from step 0")
    p.add_argument("--tolerance", type=float, default=1e-3, help="largest relative loss gap")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args()
    f32, bf16 = run(args, "float32"), run(args, "bfloat16")
    if [r["step"] for r in f32] != [r["step"] for r in bf16]:
        raise SystemExit(f"the two runs logged different steps: is {args.workdir} fresh?")
    curve = [
        {
            "step": a["step"],
            "float32": a["loss"],
            "bfloat16": b["loss"],
            "gap": b["loss"] - a["loss"],
        }
        for a, b in zip(f32, bf16, strict=True)
    ]
    rel = [abs(c["gap"]) / abs(c["float32"]) for c in curve]
    tail = rel[len(rel) - max(1, len(rel) // 4) :]
    median = lambda rows: sorted(r["step_time_s"] for r in rows)[len(rows) // 2]
    result = {
        "benchmark": "bf16_curve",
        "config": args.config,
        "steps": args.steps,
        "max_abs_gap": max(abs(c["gap"]) for c in curve),
        "max_rel_gap": max(rel),
        "last_quarter_max_rel_gap": max(tail),
        "tolerance": args.tolerance,
        "within_tolerance": max(rel) <= args.tolerance,
        "step_time_s": {"float32": median(f32), "bfloat16": median(bf16)},
        "curve": curve,
    }
    emit(result, args.out)
    sys.exit(0 if result["within_tolerance"] else 1)


if __name__ == "__main__":
    main()

"""The shipped pod configurations compiled for their TPU topologies on this host (no TPU needed):
per chip, memory against HBM, model FLOPs' time at the bf16 peak, executed collective bytes
against the mesh's minimum and their time at the interconnect's bandwidth.

    python benchmarks/tpu_compile.py                       # every case below (~6 min on 2 cores)
    python benchmarks/tpu_compile.py --cases tpu_pod --out pod.json

Each case is what `python -m pretrain.compile` reports for one config and topology
(`albert_jax.train.aot.analyze`: the trainer's own step). The reference in the same run is the
analytic minimum of each case's collectives (`collective_over_minimum`, target <= 2) and its
FLOP time (`collective_over_flops_time`, target < 1). Needs libtpu (`uv sync --extra tpu`).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/ on sys.path)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # configs/

from albert_jax.configs.pretrain import paper, tpu_pod  # noqa: E402
from albert_jax.tasks.pretraining import make_task  # noqa: E402
from albert_jax.train import aot, topology  # noqa: E402

# name: (config, overrides, topology); the commands in docs/performance.md
CASES = {
    # configs/pretrain/tpu_pod.py as shipped, on the slice its docstring names
    "tpu_pod": (lambda: tpu_pod.get_config(), {}, "v4-256"),
    # configs/pretrain/paper.py:albert-base, data parallel on the v5e-16 its docstring names
    "paper_base": (lambda: paper.get_config("albert-base"), {"grad_accum_steps": 16}, "v5e-16"),
    # the paper's not-shared xxlarge (BERT-style, 2.4B parameters) on v5e-256, FSDP over 16
    "xxlarge_none": (
        lambda: tpu_pod.get_config(),
        {"model.layout": "none", "grad_accum_steps": 2},
        "v5e-256",
    ),
}


def build(name: str):
    make, overrides, topo = CASES[name]
    config = make()
    for key, value in overrides.items():
        section, _, field = key.rpartition(".")
        (config[section] if section else config)[field] = value
    return config, topology.parse(topo)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    p.add_argument("--largest-batch", action="store_true", help="also the largest batch per chip")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    rows = []
    for name in args.cases.split(","):
        config, topo = build(name)
        report = aot.analyze(config, lambda c: make_task(c, c.data), topo, args.largest_batch)
        report["case"] = name
        report["collective_over_flops_time"] = report["collective_time_s"] / report["flops_time_s"]
        print(aot.summary(report), file=sys.stderr, flush=True)
        rows.append(report)
    emit({"benchmark": "tpu_compile", "jax": jax.__version__, "rows": rows}, args.out)


if __name__ == "__main__":
    main()

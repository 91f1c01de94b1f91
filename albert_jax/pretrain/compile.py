r"""Compile the pretraining train step for a TPU topology on this host, which need not have a TPU:
`python -m pretrain.compile --config configs/pretrain/NAME.py --topology v5e-256`.

  python -m pretrain.compile --config configs/pretrain/tpu_pod.py --topology v4-256
  python -m pretrain.compile --config configs/pretrain/paper.py:albert-base --topology v5e-16 \
      --config.mesh_shape=-1,1,1 --config.grad_accum_steps=16
  python -m pretrain.compile --config configs/pretrain/tpu_pod.py --topology v5e-256 --slices 2

The step is the one `python -m pretrain` runs on that pod (`albert_jax.train.aot`: the trainer's
`compile_task` on the topology's compile-only devices, its `auto` switches resolved for TPU);
no data is read and nothing is materialized. Prints a readable summary on stderr and one JSON
document on stdout (also `--out FILE`): per-chip bytes against the chip's HBM, fits or not, the
largest batch per chip that fits, model FLOPs and their time at the bf16 peak, each collective's
executed bytes and their time at the interconnect's bandwidth, compile time. A config that does
not fit exits 2 with one line naming what to change. Needs libtpu: `uv sync --extra tpu`.
"""

from __future__ import annotations

import json
import os
import sys

# Compile-only TPU devices need no TPU backend: keep jax on the host's CPU (a TPU VM too).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from albert_jax import cli, paths  # noqa: E402
from albert_jax.data.pretraining.pipeline import check_positions  # noqa: E402
from albert_jax.model import presets  # noqa: E402
from albert_jax.tasks.pretraining import make_task, objective_leaves  # noqa: E402
from albert_jax.train import aot, topology  # noqa: E402
from albert_jax.train.config import Plan  # noqa: E402
from albert_jax.train.optim import OptimConfig  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "Pretraining config file.")
_TOPOLOGY = flags.DEFINE_string("topology", None, "e.g. v5e-256, v4-128, v5p-128, v5e:4x4")
_SLICES = flags.DEFINE_integer("slices", 1, "slices of the topology (multi-slice: 'data' on DCN)")
_OUT = flags.DEFINE_string("out", None, "also write the JSON report here")
_HLO = flags.DEFINE_string("hlo_out", None, "also write the compiled program's HLO text here")
_LARGEST = flags.DEFINE_boolean(
    "largest_batch", True, "a second compile at twice the batch: the largest batch that fits"
)


def main(argv):
    del argv
    if _CONFIG.value is None or _TOPOLOGY.value is None:
        raise app.UsageError("--config and --topology are required")
    config = (
        Plan.of(_CONFIG.value).with_leaves(**objective_leaves(_CONFIG.value)).record(_CONFIG.value)
    )
    OptimConfig.from_config(config.optim).check(int(config.optim.total_steps))
    check_positions(config.data, presets.from_run_config(config))
    topo = topology.parse(_TOPOLOGY.value, _SLICES.value)
    with config.unlocked():
        config.slices = topo.slices
    try:
        report = aot.analyze(
            config,
            lambda c: make_task(c, c.data, presets.from_run_config(c)),
            topo,
            largest_batch=_LARGEST.value,
            hlo_out=_HLO.value,
        )
    except aot.DoesNotFit as e:
        _emit(e.report)
        raise
    _emit(report)


def _emit(report: dict) -> None:
    print(aot.summary(report), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2, default=float)
    print(text, flush=True)
    if _OUT.value:
        paths.write_text(_OUT.value, text + "\n")


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

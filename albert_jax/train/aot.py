"""Ahead-of-time: the trainer's own train step compiled for a TPU topology this host does not
own, and what the TPU compiler says of it (after MaxText's `train_compile.py`).

`analyze(config, make_task, topology)` builds the step exactly as `python -m pretrain` would on
that pod (`trainer.compile_task`: the same function, shardings, donation, accumulation; the
model's `auto` switches resolved for TPU), lowers it on abstract inputs (no data read, nothing
materialized) and compiles it. The report, per chip and per step:

- bytes: arguments (train state and batch), temporaries, outputs, aliased (the donated state
  written in place), total = arguments + temporaries + outputs - aliased, against the chip's HBM;
- FLOPs: analytic (`task.flops_per_example`: every layer application; XLA's count misses loop
  trip counts) and their time at the chip's bf16 peak;
- collectives: each kind's executed bytes through loop trip counts (`albert_jax.train.hlo`), their
  time at the chip's interconnect bandwidth (an all-reduce moves its bytes twice), and the
  analytic minimum for the mesh (`minimum_collective_bytes`): one reduction of the gradients per
  step over 'data' (of a device's 1/fsdp share), and with 'fsdp' > 1 per micro-batch a gather of
  the parameters (two with remat) and a reduce-scatter of their gradients;
- the largest batch per chip that fits, from a second compile at twice the micro-batch
  (temporaries grow linearly with it).
"""

from __future__ import annotations

import math
import re
import time

import jax

from albert_jax.errors import InputError
from albert_jax.train import hlo
from albert_jax.train.config import TrainerConfig
from albert_jax.train.topology import Topology
from albert_jax.train.trainer import compile_task

GIB = 2**30
# The TPU compiler's refusal names what it needed: "... required for HLO temporaries (131.02G)
# exceeds available HBM (15.75G)" or "Used 54.2G of 15.75G hbm".
_OOM = re.compile(r"(?:\(|Used )([\d.]+)([KMGT]?)i?B?\)? (?:exceeds|of)", re.I)
_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class DoesNotFit(InputError):
    """The program needs more HBM than the chip has; `report` says how much (an input error: the
    config must change)."""

    def __init__(self, report: dict):
        super().__init__(report["advice"])
        self.report = report


def _param_bytes(abstract_params) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(abstract_params))


def compile_for(config, task, topology: Topology, devices=None):
    """(compiled or the compiler's out-of-memory error, CompiledTask, compile seconds)."""
    t0 = time.perf_counter()
    run = compile_task(config, task.job(), devices=devices or topology.devices())
    lowered = run.lower(task.batch_spec())
    try:
        compiled = lowered.compile()
    except Exception as e:  # RESOURCE_EXHAUSTED: the compiler names what it needed
        if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
            raise
        compiled = e
    return compiled, run, time.perf_counter() - t0


def _memory(compiled, hbm: int) -> dict:
    if isinstance(compiled, Exception):
        m = _OOM.search(str(compiled))
        used = float(m.group(1)) * _UNIT[m.group(2).upper()] if m else float("nan")
        return {"total_bytes": used, "total_gib": round(used / GIB, 3),
                "hbm_gib": round(hbm / GIB, 3), "fits": False}  # fmt: skip
    m = compiled.memory_analysis()
    total = m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
    total -= m.alias_size_in_bytes
    return {
        "arguments_gib": round(m.argument_size_in_bytes / GIB, 3),
        "temporaries_gib": round(m.temp_size_in_bytes / GIB, 3),
        "outputs_gib": round(m.output_size_in_bytes / GIB, 3),
        "aliased_gib": round(m.alias_size_in_bytes / GIB, 3),
        "total_gib": round(total / GIB, 3),
        "total_bytes": total,
        "hbm_gib": round(hbm / GIB, 3),
        "fits": total <= hbm,
    }


def minimum_collective_bytes(param_bytes: int, mesh_shape: dict, accum: int, remat: bool) -> int:
    """Per chip per step, the parameters counted in their stored dtype: with 'data' > 1 one
    reduction of the gradients per step (a device's 1/fsdp share); with 'fsdp' > 1, per
    micro-batch, the parameters gathered (twice when remat recomputes the forward pass) and their
    gradients reduce-scattered once."""
    data, fsdp = mesh_shape.get("data", 1), mesh_shape.get("fsdp", 1)
    total = param_bytes // fsdp if data > 1 else 0
    if fsdp > 1:
        total += (3 if remat else 2) * param_bytes * accum
    return total


def analyze(
    config, make_task, topology: Topology, largest_batch: bool = True, hlo_out: str | None = None
) -> dict:
    """The report of `make_task(config)`'s train step on `topology` (see the module doc). Raises
    `DoesNotFit` (with the report) when it needs more than the chip's HBM. `hlo_out`: also write
    the compiled program's HLO text there."""
    chip = topology.chip
    devices = topology.devices()
    task = make_task(config)
    compiled, run, seconds = compile_for(config, task, topology, devices)
    mesh = {k: int(v) for k, v in run.mesh.shape.items()}
    accum = TrainerConfig.from_config(config).grad_accum_steps
    chips = len(devices)
    batch = int(task.global_batch_size)
    shards = mesh["data"] * mesh["fsdp"]
    flops = task.flops_per_example() * batch / chips
    report = {
        "topology": topology.name,
        "libtpu_topology": topology.libtpu_name,
        "slices": topology.slices,
        "chips": chips,
        "device_kind": devices[0].device_kind,
        "mesh": mesh,
        "grad_accum_steps": accum,
        "global_batch": batch,
        "batch_per_chip": batch / shards,
        "seq_length": int(task.seq_length),
        "layout": task.model_config.layout,
        "model_params": sum(x.size for x in jax.tree_util.tree_leaves(run.abstract.params)),
        "compile_s": round(seconds, 1),
        "memory": _memory(compiled, chip.hbm_bytes),
        "model_flops_per_chip": flops,
        "flops_time_s": flops / chip.peak_bf16_flops,
    }
    if isinstance(compiled, Exception) or not report["memory"]["fits"]:
        report["advice"] = advice(report)
        raise DoesNotFit(report)
    text = compiled.as_text()
    if hlo_out:
        with open(hlo_out, "w") as f:
            f.write(text)
    stats = hlo.collective_stats(text)
    executed = sum(s["executed_bytes"] for s in stats.values())
    wire = sum(s["executed_bytes"] * (2 if k == "all-reduce" else 1) for k, s in stats.items())
    remat = task.execution.remat != "none"
    minimum = minimum_collective_bytes(_param_bytes(run.abstract.params), mesh, accum, remat)
    report["collectives"] = {
        k: {**s, "executed_gib": round(s["executed_bytes"] / GIB, 4)} for k, s in stats.items()
    }
    report["collective_executed_gib"] = round(executed / GIB, 4)
    report["collective_minimum_gib"] = round(minimum / GIB, 4)
    report["collective_over_minimum"] = round(executed / minimum, 3) if minimum else None
    report["collective_time_s"] = wire / chip.ici_bytes_per_s
    if largest_batch:
        report["largest_batch_per_chip"] = _largest_batch(config, make_task, topology, report)
    return report


def _largest_batch(config, make_task, topology, report) -> int | None:
    """Sequences per chip per step (at this accumulation) whose step still fits: temporaries are
    affine in the micro-batch, so two compiles (this one and one at twice the batch) give it."""
    doubled = config.copy_and_resolve_references()
    with doubled.unlocked():
        doubled.data.global_batch_size = 2 * report["global_batch"]
    compiled, _, _ = compile_for(doubled, make_task(doubled), topology)
    total1 = report["memory"]["total_bytes"]
    total2 = _memory(compiled, topology.chip.hbm_bytes)["total_bytes"]
    per_seq = (total2 - total1) / report["batch_per_chip"]
    if not per_seq > 0 or math.isnan(per_seq):
        return None
    fixed = total1 - per_seq * report["batch_per_chip"]
    granule = report["grad_accum_steps"]  # whole micro-batches
    fit = int((topology.chip.hbm_bytes - fixed) / per_seq) // granule * granule
    return max(fit, 0)


def advice(report: dict) -> str:
    """One line: what does not fit and what to change."""
    m, mesh = report["memory"], report["mesh"]
    line = (
        f"does not fit: {m['total_gib']:.1f} GiB per chip of {m['hbm_gib']:.2f} GiB on "
        f"{report['topology']} (mesh {mesh}, {report['batch_per_chip']:g} sequences per chip "
        f"in {report['grad_accum_steps']} micro-batch(es)): "
    )
    state_heavy = m.get("arguments_gib", 0) > 0.5 * m["hbm_gib"]
    if state_heavy or mesh["fsdp"] == 1:
        line += "shard the state over more chips (--config.mesh_shape=-1,FSDP,1 with a larger FSDP)"
        line += ", or "
    line += (
        "split the batch into more micro-batches (--config.grad_accum_steps), "
        "recompute more (--config.execution.remat=full), or lower data.global_batch_size"
    )
    return line


def summary(report: dict) -> str:
    """The report as a few readable lines."""
    m = report["memory"]
    lines = [
        f"{report['topology']} ({report['libtpu_topology']} x{report['slices']} slice(s), "
        f"{report['chips']} {report['device_kind']} chips), mesh {report['mesh']}, "
        f"{report['layout']} layout, global batch {report['global_batch']} in "
        f"{report['grad_accum_steps']} micro-batch(es), seq {report['seq_length']}; "
        f"compiled in {report['compile_s']} s",
        f"per chip: {m['total_gib']:.2f} GiB of {m['hbm_gib']:.2f} GiB HBM "
        + (
            f"(arguments {m['arguments_gib']:.2f}, temporaries {m['temporaries_gib']:.2f}, "
            f"outputs {m['outputs_gib']:.2f}, aliased {m['aliased_gib']:.2f}): "
            if "arguments_gib" in m
            else ": "
        )
        + ("fits" if m["fits"] else "DOES NOT FIT"),
        f"model FLOPs per chip per step {report['model_flops_per_chip']:.3g}: "
        f"{report['flops_time_s'] * 1e3:.1f} ms at the bf16 peak",
    ]
    if "collectives" in report:
        kinds = ", ".join(
            f"{k} {s['executed_gib']:.3f} GiB ({s['executed']}x)"
            for k, s in report["collectives"].items()
            if s["executed"]
        )
        lines.append(
            f"collectives per chip per step: {kinds or 'none'}; "
            f"{report['collective_executed_gib']:.3f} GiB executed against a minimum of "
            f"{report['collective_minimum_gib']:.3f} GiB; "
            f"{report['collective_time_s'] * 1e3:.1f} ms at the interconnect's bandwidth"
        )
    if report.get("largest_batch_per_chip") is not None:
        lines.append(f"largest batch per chip that fits: ~{report['largest_batch_per_chip']}")
    return "\n".join(lines)

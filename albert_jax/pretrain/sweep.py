r"""Sweeps: `python -m pretrain.sweep --config configs/sweeps/NAME.py --workdir DIR`.

Runs every point of the sweep (see `albert_jax.experiments.sweep`): the data is built once, then
each group (one pretraining run and the fine-tuning runs on its checkpoint) runs here one after the
other, with a progress line; a finished step is skipped and an interrupted one resumes, so rerunning
the command continues a killed sweep. At the end it writes DIR/results.csv, DIR/results.md (one
table per task, mean ± std over seeds, the paper's numbers beside) and DIR/plots/.

    python -m pretrain.sweep --config configs/sweeps/unshare_finetune.py --workdir runs/sw_unshare
    python -m pretrain.sweep --config configs/sweeps/sharing_ablation.py --workdir runs/sw_sharing \
        --set pretrain.total_steps=200 --dry_run           # print the commands, run nothing
    python -m pretrain.sweep --config ... --workdir ... --launcher=print   # one line per group
    python -m pretrain.sweep --config ... --workdir ... --launcher=slurm   # submitit jobs
    python -m pretrain.sweep --config ... --workdir ... --report_only      # tables and plots

A sweep with `results` (a folder in the repository, `Sweep.results`) keeps each finished step's
small files there and writes its report there; a rerun in a fresh checkout rebuilds the
pretraining, checks it is the same (its fingerprint), and skips every kept cell.

On a cluster each group is one job: `--launcher=print` prints one command per group (for a TPU
pod or a job array; each is this command with `--group=K`), `--launcher=slurm` submits them with
submitit (`local` and `debug` are submitit's executors on this machine, waited for). `--set
KEY=VALUE` adds a fixed override (`pretrain.FIELD`, `finetune.FIELD`, or `seeds=0,1`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os

from absl import app, flags

from albert_jax import cli
from albert_jax.experiments.sweep import (
    apply_sets,
    check,
    group_command,
    groups,
    load,
    prepare_steps,
    run_local,
    steps,
    submit,
)
from albert_jax.train import lock

_CONFIG = flags.DEFINE_string("config", None, "Sweep config (configs/sweeps/NAME.py).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Sweep directory.")
_SET = flags.DEFINE_multi_string("set", [], "Fixed override, e.g. pretrain.total_steps=200.")
_DRY = flags.DEFINE_boolean("dry_run", False, "Print the steps, run nothing.")
_GROUP = flags.DEFINE_integer("group", None, "Run this group only (a cluster job).")
_LAUNCHER = flags.DEFINE_enum(
    "launcher", "here", ["here", "print", "slurm", "local", "debug"],
    "here: run the groups here, one after the other; print: one command per group; "
    "slurm / local / debug: submit with submitit.",
)  # fmt: skip
_REPORT = flags.DEFINE_boolean(
    "report", True, "Write results.csv, results.md and plots at the end."
)
_REPORT_ONLY = flags.DEFINE_boolean("report_only", False, "Only write the tables and plots.")


def main(argv):
    del argv
    if not _CONFIG.value or not _WORKDIR.value:
        raise app.UsageError("--config and --workdir are required")
    sweep = apply_sets(load(_CONFIG.value), _SET.value)
    check(sweep)
    workdir = os.path.abspath(_WORKDIR.value)
    all_groups = groups(sweep)
    indices = [_GROUP.value] if _GROUP.value is not None else list(range(len(all_groups)))
    if any(not 0 <= i < len(all_groups) for i in indices):
        raise app.UsageError(f"--group must be in 0..{len(all_groups) - 1}")
    # Imported here: it loads flax (seconds), and a bad --set should fail at once.
    from albert_jax.experiments import sweep_report

    # With `Sweep.results` the report is the kept cells' (the repository's), not this directory's.
    report_dir = os.path.abspath(sweep.results) if sweep.results else workdir
    if _REPORT_ONLY.value:
        print(sweep_report.write(sweep, report_dir))
        return
    prep = prepare_steps(sweep, workdir)
    if _DRY.value:
        for s in prep:
            print(f"# {s.label}{' (done)' if s.done() else ''}\n{' '.join(s.command)}")
        for i in indices:
            for s in steps(sweep, all_groups[i], workdir):
                print(
                    f"# group {i}: {s.label}{' (done)' if s.done() else ''}\n{' '.join(s.command)}"
                )
        return
    for d in {workdir, report_dir}:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "sweep.json"), "w") as f:
            json.dump(dataclasses.asdict(sweep), f, indent=1, default=str)
    if _LAUNCHER.value == "print":
        for i in indices:
            print(group_command(_CONFIG.value, workdir, _SET.value, i))
        return
    # The data first, once, before the jobs that read it. Another sweep on this workdir (a
    # --group job) may be building it: this one waits, then finds it done.
    with lock.hold(workdir, name=".lock-data", wait=True):
        run_local(prep)
    if _LAUNCHER.value != "here" and _GROUP.value is None:
        jobs = submit(_CONFIG.value, workdir, _SET.value, indices, _LAUNCHER.value, sweep)
        if _LAUNCHER.value == "slurm":
            return  # rerun with --launcher=here --report once they are done, to collect
        for job in jobs:  # local / debug: on this machine, so wait and report
            job.result()
    else:  # one sweep per group at a time (its runs lock their own workdirs as well)
        with contextlib.ExitStack() as held:
            for i in indices:
                held.enter_context(lock.hold(workdir, name=f".lock-group-{i}"))
            run_local([s for i in indices for s in steps(sweep, all_groups[i], workdir)])
    if _REPORT.value and _GROUP.value is None:
        print(sweep_report.write(sweep, report_dir), flush=True)


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

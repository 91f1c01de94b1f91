"""The fine-tuning learning-rate search: short trials over a grid suited to the model's size,
each scored on dev; the best trial whose predictions did not collapse gives the full run its
learning rate. When every trial collapsed, the trials were too short: they run again, longer.

Researchers pick the fine-tuning rate on dev for every new task (the BERT and ALBERT papers from
a small grid); a rule by model size alone fits the tasks it was chosen on and collapses the next
one to a single class. A trial is the full run's recipe (head multiplier, warmup fraction,
batch, dropout, data order of the first seed) compressed to `trial_steps`, decaying to 0.

One compiled step serves every trial of a length: the optimizer is built for a peak rate of 1
and its update is scaled by the trial's rate, a hyperparameter in the optimizer state
(`optax.inject_hyperparams`, set by name per trial). The trials run through the trainer's loop
(`albert_jax.train.loop.run`) with every hook off. Every update of AdamW / LAMB (decoupled
weight decay included) is linear in the peak rate when the schedule ends at 0, so a trial at
rate r is exactly a run built with r.

`workdir/lr_search.json` records the settings, every finished trial and the choice: a rerun
reuses it (a run killed mid-search resumes at the next trial), and the record is copied into
each seed's `results.json` and the run's `summary.json`.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from etils import epath

from albert_jax import paths
from albert_jax.tasks.finetune_config import FinetuneConfig, FinetuneError
from albert_jax.tasks.finetuning import FinetuneData, make_task
from albert_jax.train import loop
from albert_jax.train.config import Plan, read_evals
from albert_jax.train.prefetch import DevicePrefetch
from albert_jax.train.trainer import compile_task, global_batch, training_evals

# (hidden size, grid) at the two ends; each point is interpolated geometrically in between, as
# the auto rate (`jobs.run.AUTO_LR`). Small models (the project's CPU checkpoints) train
# between 3e-5 and 3e-4 with the head at 10x (1e-4 on the 4-class reviews, 3e-4 on NER); base
# and larger take the papers' grid.
GRIDS = ((256, (3e-5, 1e-4, 3e-4)), (768, (1e-5, 2e-5, 5e-5)))
RECORD = "lr_search.json"


def default_grid(hidden_size: int) -> tuple[float, ...]:
    """The grid for a model of this hidden size (`GRIDS`)."""
    (h0, g0), (h1, g1) = GRIDS
    t = min(1.0, max(0.0, math.log(max(hidden_size, 1) / h0) / math.log(h1 / h0)))
    return tuple(float(f"{a * (b / a) ** t:.2g}") for a, b in zip(g0, g1, strict=True))


def parse_grid(value) -> tuple[float, ...]:
    """'1e-5,3e-5' (or a sequence) -> sorted positive floats; '' -> ()."""
    items = value.replace(" ", "").split(",") if isinstance(value, str) else list(value or ())
    try:
        grid = sorted({float(x) for x in items if x != ""})
    except (TypeError, ValueError):
        raise FinetuneError(f"lr_search.grid={value!r}: expected rates like '1e-5,3e-5'") from None
    if any(not (math.isfinite(x) and x > 0) for x in grid):
        raise FinetuneError(f"lr_search.grid={value!r}: every rate must be > 0")
    return tuple(grid)


def wanted(config) -> bool:
    """Search when the config asks for it (`lr_search.enabled`) and leaves the rate to auto."""
    enabled = FinetuneConfig.from_config(config).lr_search.enabled
    return enabled and config.optim.learning_rate is None


def check_config(config) -> None:
    """What can be checked before anything is read (the entry points call it first): the
    section's own checks (`LrSearch`) and the grid."""
    parse_grid(FinetuneConfig.from_config(config).lr_search.grid)


# Chained after the optimizer: every update times the trial's rate (`step_size`, 1 at init).
TRIAL_RATE = optax.inject_hyperparams(optax.scale)


def trial_plan(plan: Plan, warmup_fraction: float, trial_steps: int) -> Plan:
    """The full run's plan compressed to `trial_steps` at a peak rate of 1 (the trial's rate is
    applied by `TRIAL_RATE`), decaying to 0."""
    warmup = round(warmup_fraction * trial_steps)
    return plan.replace(total_steps=trial_steps).with_optim(
        total_steps=trial_steps, warmup_steps=warmup, learning_rate=1.0, end_lr=0.0
    )


def settings(config, plan: Plan, data: FinetuneData) -> dict[str, Any]:
    """What the search depends on: a saved record with other settings is not reused."""
    f = data.settings
    s = f.lr_search
    grid = parse_grid(s.grid) or default_grid(data.model_config.hidden_size)
    total = plan.total_steps
    trial_steps = max(1, int(round(float(s.budget) * total / len(grid))))
    return {
        "grid": list(grid),
        "trial_steps": trial_steps,
        "retries": int(s.retries),
        "full_steps": total,
        "seed": plan.seed,
        "lr_multipliers": {**config.optim, **plan.optim}["lr_multipliers"],  # as resolved
        "init": str(f.init),
        "unshare": str(f.unshare or ""),
        "max_train_examples": int(f.max_train_examples or 0),
        "batch_size": int(config.batch_size),
        # every task setting (files, lengths, labels), as JSON reads it back
        "task": json.loads(json.dumps(config.task.to_dict(), default=str)),
    }


def search(
    config, plan: Plan, data: FinetuneData, workdir: str, fallback: float
) -> dict[str, Any] | None:
    """Runs the trials (or reuses `workdir/lr_search.json`) and returns the record:
    {settings..., metric, mode, trials: [{learning_rate, steps, dev, score, collapsed, finite,
    seconds}], chosen}. `plan` is the full run's (`run.schedule`), its seed the first one.

    When every trial of a round collapsed, the round was too short for the model to leave the
    label prior (on hsk, half an epoch: every rate; one epoch: 1e-4 trains): the collapsed rates
    run again at twice the length, at most `lr_search.retries` times and never past the run's
    length. When none ever trained, `chosen` is `fallback` (the rate by model size) and
    `fallback` is true. None when SIGTERM stopped the search: the finished trials are in the
    record, and a rerun goes on from there."""
    main = jax.process_index() == 0
    want = settings(config, plan, data)
    path = epath.Path(paths.resolve(paths.join(workdir, RECORD)))
    record = json.loads(path.read_text()) if path.exists() else {}
    task = make_task(config, data)
    split = dev_split(config, task.job())
    if split not in (None, "dev"):  # trials scored on a sample of dev (`evals.dev.sample`)
        want["scored_on"] = split
    keys = {*want, "scored_on"}  # a record scored on a sample is not one on the whole split
    if {k: record.get(k) for k in keys} != {k: want.get(k) for k in keys}:
        record = {}
    if record.get("chosen") is not None:
        if main:
            print(format_record(record, reused=True), flush=True)
        return record
    metric, mode = task.best_metric
    record = {**want, "metric": metric, "mode": mode, "trials": record.get("trials", [])}
    if main:
        print(
            f"learning-rate search on seed {want['seed']}: {len(want['grid'])} trials of "
            f"{want['trial_steps']} steps (the run: {want['full_steps']}), rates "
            f"{', '.join(f'{x:g}' for x in want['grid'])}, scored by "
            f"{want.get('scored_on', 'dev')} {metric}",
            flush=True,
        )
    stop = loop.StopSignal("stopping the learning-rate search (its finished trials are kept)")
    try:
        return _rounds(record, want, config, plan, data, path, fallback, stop)
    finally:
        stop.restore()


def _rounds(record, want, config, plan, data, path, fallback, stop) -> dict[str, Any] | None:
    """The search's rounds (see `search`); None when SIGTERM stopped it."""
    main, metric, mode = jax.process_index() == 0, record["metric"], record["mode"]
    done = {(t["learning_rate"], t["steps"]) for t in record["trials"]}
    rates, steps = want["grid"], want["trial_steps"]
    for round_ in range(want["retries"] + 1):
        if round_:
            if main:
                print(f"  every trial collapsed: again at {steps} steps", flush=True)
        todo = [lr for lr in rates if (lr, steps) not in done]
        if todo:  # one compiled step per trial length: the rate lives in the optimizer state
            short = trial_plan(plan, data.settings.warmup_fraction, steps)
            task = make_task(short.record(config), data)
            task.warn_collapse = False  # a collapsed trial is expected: the table says so
            job, rate = task.job(), TRIAL_RATE(step_size=1.0)
            compiled = compile_task(config, job, extra_tx=rate, plan=short)
            split = want.get("scored_on")
            with compiled.scope():
                for lr in todo:
                    trial = _trial(compiled, lr, steps, want["seed"], stop, split)
                    if trial is None:
                        return None
                    record["trials"].append(trial)
                    record["trials"].sort(key=lambda t: (t["steps"], t["learning_rate"]))
                    if main:
                        print("  " + format_trial(trial, metric), flush=True)
                        paths.write_text(str(path), json.dumps(record, indent=2))
        this = [t for t in record["trials"] if t["steps"] == steps]
        record["chosen"] = choose(this, mode)
        rates = [t["learning_rate"] for t in this if t["finite"] and t["collapsed"]]
        if record["chosen"] is not None or not rates or steps >= want["full_steps"]:
            break
        steps = min(2 * steps, want["full_steps"])
    if record["chosen"] is None:  # nothing trained in any trial: the run as without search
        record["chosen"], record["fallback"] = fallback, True
    if main:
        paths.write_text(str(path), json.dumps(record, indent=2))
        if record.get("fallback"):
            print(
                f"warning: every trial collapsed or diverged; learning rate {fallback:g} (by "
                "model size, as without the search). Longer trials: --config.lr_search.budget; "
                "other rates: --config.lr_search.grid; or set --config.optim.learning_rate",
                flush=True,
            )
        else:
            print(
                f"learning rate {record['chosen']:g} (best dev {metric} among the trials that "
                f"trained; {RECORD})",
                flush=True,
            )
    return record


def dev_split(config, job) -> str | None:
    """What a trial scores: the split the run evaluates during training, its fixed sample with
    `evals.NAME.sample` (`trainer.training_evals`), so that trials and the run's epochs agree."""
    evals = read_evals(config, job.evals, job.evaluator.splits)
    during = training_evals(evals, job, eval_every=1)
    return next(iter(during.values()))[2] if during else None


def _trial(compiled, lr: float, steps: int, seed: int, stop, split=None) -> dict[str, Any] | None:
    """One trial at peak rate `lr` for `steps`: fresh weights, the seed's data order, dev (or
    its sample, `split`) scored. None when SIGTERM came (`stop`): the trial is dropped, to run
    again on resume."""
    t0 = time.perf_counter()
    state = compiled.initial_state(seed)
    rate = optax.tree_utils.tree_get(state.opt_state, "step_size")
    rate = jax.device_put(jnp.asarray(lr, rate.dtype), rate.sharding)
    state = state.replace(opt_state=optax.tree_utils.tree_set(state.opt_state, step_size=rate))
    it = compiled.job.train_iterator(jax.process_index(), jax.process_count())
    batches = DevicePrefetch(it, lambda local: global_batch(local, compiled.mesh))
    hooks = loop.Hooks(preempted=lambda step: stop.requested)  # every other hook off
    done = loop.run(compiled.step_fn, state, batches, 0, steps, hooks)
    if stop.requested:
        return None
    loss = float(jax.device_get(done.metrics["loss"]))
    finite = bool(np.isfinite(loss))
    values = compiled.evaluate(done.state.params, steps, split) if finite else {}
    metric, mode = compiled.job.callbacks.best_metric
    score = values.get(metric)
    return {
        "learning_rate": lr,
        "steps": steps,
        "train_loss": loss if finite else None,
        "dev": {k: float(v) for k, v in values.items()},
        "score": None if score is None else float(score),
        "collapsed": bool(values.get("collapsed", 0.0)),
        "finite": finite,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def choose(trials, mode: str) -> float | None:
    """The rate of the best trial that trained (finite, not collapsed, scored); ties go to the
    lower rate. None when there is none."""
    ok = [t for t in trials if t["finite"] and not t["collapsed"] and t["score"] is not None]
    if not ok:
        return None
    sign = 1.0 if mode == "max" else -1.0
    best = max(ok, key=lambda t: (sign * t["score"], -t["learning_rate"]))
    return best["learning_rate"]


def format_trial(trial, metric: str) -> str:
    lr = f"lr {trial['learning_rate']:g} ({trial['steps']} steps): "
    if not trial["finite"]:
        return lr + "diverged (non-finite loss)"
    score = "n/a" if trial["score"] is None else f"{trial['score']:.4f}"
    what = " (collapsed: not a candidate)" if trial["collapsed"] else ""
    return f"{lr}dev {metric} {score}{what}, {trial['seconds']:.0f} s"


def format_record(record, reused: bool = False) -> str:
    reuse = f", reused from {RECORD}" if reused else ""
    head = f"learning-rate search (seed {record['seed']}{reuse}):"
    lines = [head] + ["  " + format_trial(t, record["metric"]) for t in record["trials"]]
    return "\n".join(lines + [f"  chosen: {record['chosen']:g}"])

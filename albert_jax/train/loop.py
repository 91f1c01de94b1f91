"""The training loop: steps, and the host syncing with the device only where a hook acts.

Everything a run does besides stepping is a named hook (`Hooks`): log, checkpoint, evaluate
(with keep-best), the NaN guard's message, preemption, progress and the per-step callbacks
(profiler, fault injection). The trainer (`albert_jax.train.trainer.train`) runs with all of them;
the learning-rate search's trials (`albert_jax.jobs.lr_search`) with none.

The host never waits for the device between sync steps: metrics stay on device and it dispatches
up to `RUN_AHEAD` steps ahead. A sync step is one where a hook acts (a log, checkpoint or eval
step); there every loss since the last sync is read, and a non-finite one stops the run, naming
its step (so a checkpoint is only ever written of a finite state). A log row holds the metrics of
its own step, not a mean over the interval, so a resumed run reproduces every row exactly; its
step time is the interval's mean, evaluation excluded.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

# Steps the host may dispatch ahead of the device between sync steps (each holds its batch).
RUN_AHEAD = 2


class NonFiniteLossError(FloatingPointError):
    pass


def _every(step: int, n: int) -> bool:
    return n > 0 and step % n == 0


def _never(step: int) -> bool:
    return False


def _nothing(*args) -> None:
    return None


def _nonfinite(step: int, loss: float) -> str:
    return f"loss is {loss} at step {step}; stopping"


@dataclasses.dataclass
class Hooks:
    """What a run does besides stepping; a hook left None is off. `every` of 0 with a hook set
    still acts at the last step (log, checkpoint) or never (evaluate)."""

    log: Callable[[int, dict, float], dict] | None = None  # (step, metrics, s/step) -> row
    log_every: int = 0
    checkpoint: Callable[[int, Any], None] | None = None  # (step, state): save it
    checkpoint_every: int = 0
    evaluate: Callable[[int, Any], None] | None = None  # (step, state): evaluate, keep best
    eval_every: int | tuple[int, ...] = 0  # several (evaluators): a step where any is due
    preempted: Callable[[int], bool] = _never  # stop after this step (saved first)
    nonfinite: Callable[[int, float], str] = _nonfinite  # the NaN guard's message
    progress: Callable[[int, dict | None], None] = _nothing  # every step; metrics at syncs
    before_step: Callable[[int], None] = _nothing
    after_step: Callable[[int, Any], None] = _nothing  # (step, state), dispatched not synced


@dataclasses.dataclass
class Result:
    state: Any
    step: int  # the last step taken (start when none was)
    metrics: dict | None  # the last step's metrics, on device (None when no step was taken)
    synced: dict[str, float]  # the metrics of the last sync step, on host ({} when none)


def run(step_fn, state, batches, start: int, total: int, hooks: Hooks | None = None) -> Result:
    """Steps `start + 1 .. total` of `step_fn` ((state, batch) -> (state, metrics)) on
    `batches` (a `DevicePrefetch`), calling `hooks`. A run resumed at an eval step evaluates it
    again first (a run killed between its checkpoint and its evaluation)."""
    h = hooks or Hooks()

    everies = h.eval_every if isinstance(h.eval_every, tuple) else (h.eval_every,)

    def is_eval(step: int) -> bool:
        return (
            h.evaluate is not None
            and any(n > 0 for n in everies)
            and (any(_every(step, n) for n in everies) or step == total)
        )

    pending: list[tuple[int, jax.Array]] = []  # (step, loss on device) since the last sync
    clock, steps_timed = time.perf_counter(), 0
    metrics, synced = None, {}
    if start and is_eval(start):
        h.evaluate(start, state)
        clock = time.perf_counter()
    step = start
    for step in range(start + 1, total + 1):
        h.before_step(step)
        state, metrics = step_fn(state, next(batches))
        h.after_step(step, state)
        pending.append((step, metrics["loss"]))
        steps_timed += 1
        preempted = h.preempted(step)
        save = h.checkpoint is not None and (
            _every(step, h.checkpoint_every) or step == total or preempted
        )
        log = h.log is not None and (_every(step, h.log_every) or step == total)
        evaluate = is_eval(step)
        if not save and step < total:  # the next batch's input work overlaps this step
            batches.prefetch()  # (not before a save: the checkpoint holds the input's position)
        if not (save or log or evaluate):
            if len(pending) > RUN_AHEAD:  # at most RUN_AHEAD + 1 steps in flight
                pending[-1 - RUN_AHEAD][1].block_until_ready()
            h.progress(step, None)
            if preempted:
                break
            continue
        synced = _sync(pending, metrics, h.nonfinite)  # never save a non-finite state
        if log:
            synced = h.log(step, synced, (time.perf_counter() - clock) / steps_timed)
            clock, steps_timed = time.perf_counter(), 0
        h.progress(step, synced)
        if save:
            h.checkpoint(step, state)
        if evaluate:
            h.evaluate(step, state)
            clock, steps_timed = time.perf_counter(), 0  # step times without evaluation
        if preempted:
            break
    return Result(state, step, metrics, synced)


def _sync(pending, metrics, message) -> dict[str, float]:
    """Blocks on the newest step; raises at the first non-finite loss since the last sync."""
    losses = jax.device_get([x for _, x in pending])
    values = {k: float(v) for k, v in jax.device_get(metrics).items()}
    for (step, _), loss in zip(pending, losses, strict=True):
        if not np.isfinite(loss):
            raise NonFiniteLossError(message(step, float(loss)))
    pending.clear()
    return values


class StopSignal:
    """SIGTERM (preemption) asks for a clean stop: the trainer saves a checkpoint, the
    learning-rate search keeps its finished trials. `restore()` puts the previous handler back."""

    def __init__(self, what: str = "saving a checkpoint and stopping"):
        self.requested, self.what, self.previous = False, what, None
        try:
            self.previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread (e.g. inside some test runners)
            pass

    def _handle(self, signum, frame):
        logging.warning("SIGTERM received: %s", self.what)
        self.requested = True

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)

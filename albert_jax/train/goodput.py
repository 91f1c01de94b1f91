"""Goodput: where a training run's wall time went, from the trainer's own timestamps.

`Goodput` is a stopwatch that charges every second since the run started to one part: the
default part (start-up before the loop; productive, or redone, for the step being taken) unless
a `timed(part)` block is open, whose time goes to that part instead (blocks nest: the innermost
wins). After the loop nothing is charged by default, so `other_s`, the wall time minus the
parts, is what ran after it outside a timed block (closing the writers, the final printouts).

Nothing here waits on the device: the host dispatches steps ahead, so a step's device time is
charged where the host waits for it (the loop's sync at log and checkpoint steps, a step ahead's
`block_until_ready`), i.e. to `productive` (or `redone`), at the granularity of those syncs.

The parts (`PARTS`): `productive` (steps), `startup` (from the process's start, or the end of an
earlier training in the same process, to the first step), `compile` (the first call of the train
step: jit traces and compiles it synchronously at its first dispatch), `eval`, `checkpoint_save`,
`checkpoint_restore` (with the initial weights of a fresh run), `input` (host time pulling and
placing batches) and `redone` (steps a killed earlier run had taken past its last checkpoint,
`reached_step`). `WORKDIR/goodput.json` holds one entry per run (start) of the workdir and their
total (`write`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import time

from etils import epath

from albert_jax import paths
from albert_jax.train.trackers import read_rows

PARTS = (
    "productive", "startup", "compile", "eval", "checkpoint_save", "checkpoint_restore", "input",
    "redone",
)  # fmt: skip
FILE = "goodput.json"

_IMPORTED = time.monotonic()
_previous_end: float | None = None  # monotonic end of this process's last finished training


def process_age() -> float:
    """Seconds since this process started (Linux: its start in /proc/self/stat against
    /proc/uptime, both since boot), or since this module was imported where that is unknown."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, field 3 on
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - int(fields[22 - 3]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return time.monotonic() - _IMPORTED
    return max(age, time.monotonic() - _IMPORTED)


def reached_step(workdir: str) -> int:
    """The highest step of any metrics row in `workdir` (0 without one): how far the run that
    wrote them got, at log granularity. Read before a resumed run's `MetricWriter` drops the
    rows past its checkpoint (a bucket run's part files included: `trackers.read_rows`)."""
    return max((int(row["step"]) for row in read_rows(workdir)), default=0)


class Goodput:
    """The run's wall time split into `PARTS` (seconds), from `start` (monotonic; default: the
    process's start, or the end of an earlier training in this process) to now."""

    def __init__(self, start: float | None = None, clock=time.monotonic):
        self.clock = clock
        if start is None:
            start = clock() - process_age()
            if _previous_end is not None:
                start = max(start, _previous_end)
        self.start, self._mark = start, start
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self._stack: list[str | None] = ["startup"]  # [default part, open timed blocks...]
        self.start_step = self.redo_until = 0
        self.earlier: list[dict] = []  # the workdir's earlier runs (goodput.json)

    def _charge(self) -> None:
        now = self.clock()
        if self._stack[-1] is not None:
            self.seconds[self._stack[-1]] += now - self._mark
        self._mark = now

    @contextlib.contextmanager
    def timed(self, part: str):
        """The block's time goes to `part`."""
        if part not in self.seconds:
            raise KeyError(f"unknown goodput part {part!r}; the parts: {PARTS}")
        self._charge()
        self._stack.append(part)
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()

    def charge_to(self, part: str | None) -> None:
        """Time outside timed blocks goes to `part` from now on (None: to none, i.e. other)."""
        self._charge()
        self._stack[0] = part

    def stepping(self, step: int) -> None:
        """Step `step` begins: its time is redone if a killed earlier run had taken it."""
        self.charge_to("redone" if step <= self.redo_until else "productive")

    def charged(self, part: str, fn):
        """`fn` whose every call's time goes to `part` (a hook)."""

        def call(*args, **kwargs):
            with self.timed(part):
                return fn(*args, **kwargs)

        return call

    def first_call(self, fn, part: str = "compile"):
        """`fn` whose first call's time goes to `part` (jit compiles at its first dispatch)."""
        done = False

        def call(*args, **kwargs):
            nonlocal done
            if done:
                return fn(*args, **kwargs)
            done = True
            with self.timed(part):
                return fn(*args, **kwargs)

        return call

    def resume(self, workdir: str, start_step: int) -> None:
        """A run starting at `start_step` in `workdir`: the steps a killed earlier run had taken
        past it will be redone, and goodput.json's earlier runs are kept. Call it before the
        `MetricWriter` drops the rows past the checkpoint."""
        self.start_step = start_step
        self.redo_until = max(start_step, reached_step(workdir))
        path = epath.Path(workdir) / FILE
        if path.exists():
            try:
                self.earlier = list(json.loads(path.read_text())["runs"])
            except (ValueError, KeyError, TypeError):
                self.earlier = []  # not ours to trust: this run starts the list again

    def summary(self) -> dict[str, float]:
        """Each part's seconds so far (`NAME_s`), `other_s` (the wall time none of them holds),
        `wall_s` and `goodput` (productive / wall)."""
        self._charge()
        wall = self._mark - self.start
        out = {f"{k}_s": v for k, v in self.seconds.items()}
        out["other_s"] = wall - sum(self.seconds.values())
        out["wall_s"] = wall
        out["goodput"] = self.seconds["productive"] / wall if wall > 0 else 0.0
        return out

    def record(self, step: int) -> dict:
        """This run's entry of goodput.json at `step`."""
        started = time.time() - (self.clock() - self.start)
        return {
            "started": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(),
            "start_step": self.start_step,
            "step": step,
            "redone_steps": max(0, min(step, self.redo_until) - self.start_step),
            **self.summary(),
        }

    def write(self, workdir: str, step: int) -> dict:
        """WORKDIR/goodput.json (atomically): the earlier runs, this one, and their total (wall
        time of the runs only, not the time between them). Returns its contents."""
        runs = [*self.earlier, self.record(step)]
        total = {f"{k}_s": sum(r.get(f"{k}_s", 0.0) for r in runs) for k in (*PARTS, "other")}
        total["wall_s"] = sum(r["wall_s"] for r in runs)
        total["goodput"] = total["productive_s"] / total["wall_s"] if total["wall_s"] > 0 else 0.0
        total["redone_steps"] = sum(r["redone_steps"] for r in runs)
        out = {"runs": runs, "total": total}
        paths.write_text(paths.join(workdir, FILE), json.dumps(out, indent=2))
        return out

    def finish(self) -> None:
        """The training is over: a later one in this process starts its clock here."""
        global _previous_end
        _previous_end = self.clock()


def summary_line(values: dict) -> str:
    """One console line of a summary (`Goodput.summary` or a goodput.json entry)."""
    parts = []
    for k in (*PARTS, "other"):
        parts.append(f"{k.replace('_', ' ')} {values[f'{k}_s']:.1f} s")
        if k == "redone" and values.get("redone_steps"):
            parts[-1] += f" ({values['redone_steps']} steps)"
    wall = values["wall_s"]
    return f"goodput {100 * values['goodput']:.1f}%: {', '.join(parts)}; wall {wall:.1f} s"


class TimedInput:
    """The loop's view of the batches (`DevicePrefetch`): `next` and `prefetch` charged to
    `input`. The checkpointer keeps the iterator itself (its state is saved with the steps)."""

    def __init__(self, batches, goodput: Goodput):
        self._batches, self._goodput = batches, goodput

    def __next__(self):
        with self._goodput.timed("input"):
            return next(self._batches)

    def prefetch(self) -> None:
        with self._goodput.timed("input"):
            self._batches.prefetch()

"""Named crash points for the fault-injection tests (tests/integration/test_faults.py).

`ALBERT_JAX_CRASH_AT=NAME` (or `NAME@STEP`) makes the process SIGKILL itself the first time it
reaches that point: no cleanup, no flush, as a power cut or the OOM killer would. Unset (always,
outside those tests) every point is a no-op. The points: `step` (a step dispatched, not yet
checkpointed), `checkpoint` (a save just started, async), `eval` (a step evaluated, nothing of it
written), `best` (the best model written, best.json not yet), `final` (the last checkpoint done,
the final evaluation not begun), `predictions` (the first split's predictions written).
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "ALBERT_JAX_CRASH_AT"


def crash_point(name: str, step: int | None = None) -> None:
    want = os.environ.get(CRASH_ENV)
    if not want:
        return
    point, _, at = want.partition("@")
    if point == name and (not at or (step is not None and step == int(at))):
        os.kill(os.getpid(), signal.SIGKILL)

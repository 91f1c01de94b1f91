"""Input batches put on device ahead of the step that takes them, with an exact checkpoint.

`DevicePrefetch` wraps the task's grain iterator: `prefetch()` pulls the next batch and starts
its transfer (`put`, e.g. `trainer.global_batch`) while the device still runs the step before;
`next()` hands out the oldest batch pulled. Its `get_state()` is the wrapped iterator's state
*before* the first batch still held, i.e. the position of the batches the steps consumed, so the
iterator state saved with a train state never counts a prefetched batch: a resumed run reads
that batch again. `set_state` drops what was held.

The prefetch runs in the caller's thread, between dispatching step n and waiting on it: the
input work (grain, the host-to-device copy) overlaps the device's step without a thread to
coordinate with checkpoints or SIGTERM. Grain's own workers (`data.worker_count`) parallelize
the input work itself.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import grain


class DevicePrefetch(grain.DatasetIterator):
    def __init__(self, parent: grain.DatasetIterator, put: Callable[[Any], Any], size: int = 1):
        super().__init__(parent)
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._put, self._size = put, size
        self._held: collections.deque = collections.deque()  # (parent state before, batch)

    def prefetch(self) -> None:
        """Pull batches until `size` are held (each put on device as it is pulled)."""
        while len(self._held) < self._size:
            before = copy.deepcopy(self._parent.get_state())  # never a live reference
            self._held.append((before, self._put(next(self._parent))))

    def __next__(self):
        if not self._held:
            return self._put(next(self._parent))
        return self._held.popleft()[1]

    @property
    def held(self) -> int:
        """Batches pulled ahead and not yet handed out."""
        return len(self._held)

    def get_state(self) -> dict[str, Any]:
        return self._held[0][0] if self._held else self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._held.clear()
        self._parent.set_state(state)

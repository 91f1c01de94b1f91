"""`DevicePrefetch`: batches pulled ahead of their step never count in the iterator state saved
with a train state, so a resumed run reads every batch a step did not take again."""

from __future__ import annotations

import grain
import numpy as np
import pytest

from albert_jax.train.prefetch import DevicePrefetch


def batches(n=20):
    ds = grain.MapDataset.range(n).map(lambda i: {"x": np.full(2, i)}).to_iter_dataset()
    return iter(ds)


def first(batch):
    return int(batch["x"][0])


@pytest.mark.parametrize("size", [1, 3])
def test_state_is_that_of_the_batches_handed_out(size):
    put = []
    it = DevicePrefetch(batches(), lambda b: put.append(first(b)) or b, size=size)
    assert [first(next(it)) for _ in range(2)] == [0, 1] and it.held == 0
    it.prefetch()
    assert it.held == size and put == list(range(2 + size))  # put when pulled
    state = it.get_state()  # two batches taken: a resume starts at batch 2
    assert first(next(it)) == 2
    it.prefetch()
    resumed = DevicePrefetch(batches(), lambda b: b, size=size)
    resumed.set_state(state)
    assert [first(next(resumed)) for _ in range(4)] == [2, 3, 4, 5]
    # set_state drops what was held: the held batches come again from the restored position
    it.set_state(state)
    assert it.held == 0 and [first(next(it)) for _ in range(3)] == [2, 3, 4]


class LiveState(grain.DatasetIterator):
    """An iterator whose `get_state` returns its own dict, which it then updates in place."""

    def __init__(self):
        super().__init__()
        self._state = {"next": 0}

    def __next__(self):
        self._state["next"] += 1
        return {"x": np.full(2, self._state["next"] - 1)}

    def get_state(self):
        return self._state

    def set_state(self, state):
        self._state = dict(state)


def test_a_held_state_is_a_copy():
    it = DevicePrefetch(LiveState(), lambda b: b, size=2)
    next(it)
    it.prefetch()
    assert it.get_state() == {"next": 1}
    next(it), next(it), it.prefetch()
    assert it.get_state() == {"next": 3}


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="size must be >= 1"):
        DevicePrefetch(batches(), lambda b: b, size=0)

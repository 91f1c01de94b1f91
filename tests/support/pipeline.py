"""The grain pipeline as the data tests read it: a data config with overrides, and the first
batches of its iterator."""

from albert_jax.data.pretraining import pipeline


def cfg(base, **overrides):
    d = base.copy_and_resolve_references()
    with d.unlocked():
        for k, v in overrides.items():
            d[k] = v
    return d


def take(d, n_batches, **kw):
    it = pipeline.make_iterator(d, **kw)
    try:
        return [next(it) for _ in range(n_batches)]
    finally:
        it.close()

"""A train step's loss, metrics and gradients over the whole global batch, with one reduction of
the gradients per step.

Left to XLA's SPMD partitioner, a batch-sharded gradient is reduced where it is made: the shared
block's weights were gathered and its whole gradient all-reduced once per layer of the encoder's
scan, and every gradient once per micro-batch (docs/performance.md: the TPU compiler's HLO). XLA
cannot move a reduction out of a loop. Here the batch axes of the mesh ('data', 'fsdp') are
manual (`jax.shard_map`): each device

1. gathers its 'fsdp' shards of the parameters (one `all_gather` per leaf);
2. runs forward and backward on its own examples, micro-batch after micro-batch, adding its
   *partial* gradients locally: a shared block's gradient is summed over its L applications by
   the scan's own accumulator, with no collective inside either loop;
3. reduces once: `psum_scatter` over 'fsdp' back to each leaf's shards, `psum` over the batch axes
   its leaf is replicated on.

Not-shared sub-blocks (a leading 'layers' axis of length L, `gather_per_layer`) are the
exception: gathering all L layers at once would hold the whole model on every chip, so they stay
sharded and each layer application gathers its own slice (`albert_jax.model.albert.gathering`),
whose gradient is reduce-scattered as it is made: ordinary FSDP, once per micro-batch.

The loss and metrics are sums divided by the whole global batch's normalizers, so the devices'
shares add up (`psum`) to exactly the global values. Dropout: each device folds its position on
the batch axes into the step's key, so its examples draw their own masks. The 'tensor' axis stays
with the partitioner (`axis_names`).
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util
from jax.sharding import PartitionSpec

from albert_jax.model.albert import gathering
from albert_jax.train.partitioning import BATCH_AXES


def _axes(entry) -> tuple[str, ...]:
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def manual_spec(spec: PartitionSpec, manual=BATCH_AXES) -> PartitionSpec:
    """`spec` with only the manual mesh axes (shard_map's in/out specs of a partly manual map)."""
    entries = []
    for entry in tuple(spec):
        kept = tuple(a for a in _axes(entry) if a in manual)
        entries.append(kept[0] if len(kept) == 1 else kept or None)
    return PartitionSpec(*entries)


def _gather(x, spec: PartitionSpec, skip_first: bool = False):
    """The full array from a device's shard (manual axes only); `skip_first`: `spec` describes a
    [G, ...] stack and `x` one slice of it."""
    entries = tuple(spec)[1:] if skip_first else tuple(spec)
    for dim, entry in enumerate(entries):
        if _axes(entry):
            x = jax.lax.all_gather(x, _axes(entry), axis=dim, tiled=True)
    return x


def _reduce(g, spec: PartitionSpec, gathered: bool, manual=BATCH_AXES):
    """A device's partial gradient -> its shard of the global one: reduce-scattered over the axes
    its leaf was gathered on (already done per use when not `gathered`), summed over the rest."""
    used = []
    for dim, entry in enumerate(tuple(spec)):
        names = _axes(entry)
        if names and gathered:
            g = jax.lax.psum_scatter(g, names, scatter_dimension=dim, tiled=True)
        used += names
    rest = tuple(a for a in manual if a not in used)
    return jax.lax.psum(g, rest) if rest else g


def batch_gradients(task, mesh, param_specs, accum_steps: int, per_layer: frozenset[str]):
    """fn(params, batch, norms, key) -> (loss, metrics, grads) over the global batch, for params
    and grads laid out as `param_specs` ({path: PartitionSpec} tree) and the batch split over
    the batch axes. `per_layer`: the paths gathered per layer application (see module doc)."""
    grad_fn = jax.value_and_grad(task.loss, has_aux=True)
    # Axes of size 1 are left out: nothing to gather or reduce over them.
    manual = tuple(a for a in BATCH_AXES if mesh.shape.get(a, 1) > 1)
    flat_specs = traverse_util.flatten_dict(param_specs, sep="/")
    specs = {p: manual_spec(s, manual) for p, s in flat_specs.items()}
    per_layer = frozenset(p for p in per_layer if any(_axes(e) for e in specs[p]))
    shards = math.prod(mesh.shape[a] for a in manual)
    hook = _SliceGather(specs, per_layer, mesh, task.execution.dtype) if per_layer else None

    def local(params, batch, norms, key):
        flat = traverse_util.flatten_dict(params, sep="/")
        full = {p: x if p in per_layer else _gather(x, specs[p]) for p, x in flat.items()}
        full = traverse_util.unflatten_dict(full, sep="/")
        if shards > 1:  # each device's examples draw their own dropout masks
            key = jax.random.fold_in(key, jax.lax.axis_index(manual))
        micro = jax.tree_util.tree_map(lambda x: _split_micro(x, accum_steps), batch)

        def body(carry, xs):
            i, mb = xs
            # micro-batch i's dropout key: fold_in(key, i) (the key itself without accumulation)
            k = key if accum_steps == 1 else jax.random.fold_in(key, i)
            (loss, metrics), g = grad_fn(full, mb, norms, k)
            return jax.tree_util.tree_map(jnp.add, carry, (loss, metrics, g)), None

        # Inside the map the batch axes are manual: the model's logical constraints are off, and
        # the per-layer leaves gather their slice where a layer uses it.
        with nn.logical_axis_rules(()), gathering(hook):
            (loss, metrics), grads = jax.eval_shape(lambda: grad_fn(full, batch, norms, key))
            zeros = jax.tree_util.tree_map(
                lambda s: jnp.zeros(s.shape, s.dtype), (loss, metrics, grads)
            )
            if accum_steps == 1:
                first = jax.tree_util.tree_map(lambda x: x[0], micro)
                (loss, metrics, grads), _ = body(zeros, (0, first))
            else:
                xs = (jnp.arange(accum_steps), micro)
                (loss, metrics, grads), _ = jax.lax.scan(body, zeros, xs)
        if manual:
            loss, metrics = jax.lax.psum((loss, metrics), manual)
        flat_g = traverse_util.flatten_dict(grads, sep="/")
        flat_g = {p: _reduce(g, specs[p], p not in per_layer, manual) for p, g in flat_g.items()}
        return loss, metrics, traverse_util.unflatten_dict(flat_g, sep="/")

    if not manual:  # one batch shard: the local computation is the global one
        return local
    param_in = traverse_util.unflatten_dict(specs, sep="/")
    batch_spec = PartitionSpec(manual)
    return jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(param_in, batch_spec, PartitionSpec(), PartitionSpec()),
        out_specs=(PartitionSpec(), PartitionSpec(), param_in),
        axis_names=set(manual),
        check_vma=False,
    )


def _split_micro(x, steps: int):
    """A device's [b, ...] examples -> [steps, b / steps, ...], micro-batch i = examples i,
    i + steps, ...: over all devices, micro-batch i holds global examples i, i + steps, ..."""
    b = x.shape[0]
    if b % steps:
        raise ValueError(f"batch {b} is not divisible into {steps} micro-batches")
    return x.reshape(b // steps, steps, *x.shape[1:]).swapaxes(0, 1)


class _SliceGather:
    """The hook `gathering` installs for the per-layer leaves (`albert_jax.model.albert`)."""

    def __init__(self, specs, per_layer, mesh, dtype):
        self.specs, self.per_layer, self.mesh, self.dtype = specs, per_layer, mesh, dtype

    def _spec(self, path: str):
        if path not in self.specs:  # the model's path convention and the tree's must agree
            raise KeyError(f"parameter {path!r} is not in the train state's tree")
        return self.specs[path] if path in self.per_layer else None

    def local_shape(self, path: str, shape: tuple) -> tuple:
        spec = self._spec(path)
        if spec is None:
            return shape
        split = [math.prod(self.mesh.shape[a] for a in _axes(e)) for e in tuple(spec)]
        return tuple(n // k for n, k in zip(shape, split + [1] * len(shape), strict=False))

    def __call__(self, path: str, x):
        spec = self._spec(path)
        if spec is None:
            return x
        if path.endswith("/kernel") and jnp.dtype(self.dtype) != x.dtype:
            # A matmul kernel is cast to the compute dtype where it is used (`albert.matmul`):
            # cast before the gather, and it moves half the bytes for the same result.
            for dim, entry in enumerate(tuple(spec)[1:]):
                if _axes(entry):
                    x = _gather_cast(x, _axes(entry), dim, jnp.dtype(self.dtype))
            return x
        return _gather(x, spec, skip_first=True)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _gather_cast(x, axes, dim, dtype):
    """all_gather(x.astype(dtype)) whose gradient is reduce-scattered in x's dtype (float32): the
    gradient of a bfloat16 kernel is already rounded to bfloat16 on each device; its sum is not."""
    return jax.lax.all_gather(x.astype(dtype), axes, axis=dim, tiled=True)


def _gather_cast_fwd(x, axes, dim, dtype):
    return _gather_cast(x, axes, dim, dtype), jnp.zeros((), x.dtype)


def _gather_cast_bwd(axes, dim, dtype, like, g):
    g = g.astype(like.dtype)
    return (jax.lax.psum_scatter(g, axes, scatter_dimension=dim, tiled=True),)


_gather_cast.defvjp(_gather_cast_fwd, _gather_cast_bwd)

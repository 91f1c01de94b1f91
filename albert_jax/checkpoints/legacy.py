"""Checkpoints written before every grouped leaf carried its group axis (up to 54ec26f).

Then, a leaf under encoder/attention or encoder/ffn had no leading group axis when its sub-block
had one group, and an unrolled run (`execution.scan_layers=False`) held each [G, ...] leaf of its
train state, parameters and optimizer moments alike, as a list of G per-layer arrays. Now every such
leaf is [G, ...] in every layout, scanned or unrolled. This module is the one conversion, applied
where a checkpoint is read (`checkpoint.load`, `source.load_workdir`, `Checkpointer`): a list is
stacked and a missing G = 1 axis is added; nothing else ever differed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from albert_jax.checkpoints.common import flatten, unflatten


def _lacks_group_axis(shape, want) -> bool:
    return len(shape) == len(want) - 1 and tuple(want[:1]) == (1,)


def canonical_shape(shape, want) -> tuple[int, ...]:
    """A stored leaf's shape (a per-layer list's: (G, *one layer's)) as it loads now."""
    return (1, *shape) if _lacks_group_axis(shape, want) else tuple(shape)


def canonical(leaf, want):
    """A leaf as read (an array, or a list of per-layer arrays) -> its current form of shape
    `want`."""
    if isinstance(leaf, list | tuple):
        stack = np.stack if all(isinstance(x, np.ndarray) for x in leaf) else jnp.stack
        leaf = stack(leaf)
    return leaf[None] if _lacks_group_axis(np.shape(leaf), want) else leaf


def canonical_tree(tree: dict[str, Any], want: dict[str, tuple[int, ...]], fn=canonical):
    """`fn(leaf, want[path])` on every leaf (a per-layer list is one) of a nested dict whose
    path is in `want` ({'a/b/c': shape}); the others stay."""
    flat = flatten(tree)
    return unflatten({k: fn(v, want[k]) if k in want else v for k, v in flat.items()})


# --- train states (parameters and optimizer state), read with orbax ---
def stored_layout(stored_params: Any, abstract_params: Any) -> dict[str, tuple]:
    """{path: (how it was written: G for a list of G arrays, 0 without its G = 1 axis; its
    shape now)} for the parameters a train state's metadata (`stored_params`, orbax's tree)
    holds in the old layout; empty for a current checkpoint."""
    if not (isinstance(stored_params, dict) and isinstance(abstract_params, dict)):
        return {}
    now = {k: tuple(v.shape) for k, v in flatten(abstract_params).items()}
    out = {}
    for path, leaf in flatten(stored_params).items():
        want = now.get(path)
        if want is None:
            continue
        if isinstance(leaf, list | tuple):
            out[path] = (len(leaf), want)
        elif _lacks_group_axis(tuple(leaf.shape), want):
            out[path] = (0, want)
    return out


def _param_path(keypath) -> str:
    """'a/b/c' of the trailing dict keys of a state leaf's key path: the parameter an optimizer
    moment belongs to (`.opt_state[0][1].mu['encoder']...` -> 'encoder/...')."""
    keys = []
    for k in reversed(keypath):
        if not isinstance(k, jax.tree_util.DictKey):
            break
        keys.append(str(k.key))
    return "/".join(reversed(keys))


def legacy_abstract(abstract: Any, layout: dict[str, tuple]) -> Any:
    """The abstract state (ShapeDtypeStructs with shardings) as the old code wrote it: every
    leaf of a parameter in `layout` (the parameter and its optimizer moments) split per layer
    or without its group axis."""

    def one(keypath, x):
        how = layout.get(_param_path(keypath))
        if how is None or tuple(x.shape) != how[1]:
            return x
        sharding = x.sharding
        if isinstance(sharding, NamedSharding):  # the group axis is never split ('layers')
            sharding = NamedSharding(sharding.mesh, PartitionSpec(*sharding.spec[1:]))
        part = jax.ShapeDtypeStruct(x.shape[1:], x.dtype, sharding=sharding)
        return tuple(part for _ in range(how[0])) if how[0] else part

    return jax.tree_util.tree_map_with_path(one, abstract)


def from_legacy(restored: Any, abstract: Any) -> Any:
    """A state read with `legacy_abstract` -> the current tree, placed as `abstract` says."""

    def one(want, got):
        if not isinstance(got, list | tuple) and not _lacks_group_axis(np.shape(got), want.shape):
            return got  # as it is now (a raw key's data included)
        return jax.device_put(canonical(got, want.shape), want.sharding)

    return jax.tree_util.tree_map(one, abstract, restored)

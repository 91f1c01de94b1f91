"""Logical axis names -> mesh axes, mesh construction, and shardings for parameter trees.

Model code names only logical axes (`vocab`, `embed` = E, `hidden` = H, `mlp` = I, `heads` = N*D,
`layers` = the group axis of stacked sub-blocks); these rules place them on the mesh axes
('data', 'fsdp', 'tensor'). Rules are tried in order and a mesh axis is used once per array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")  # the mesh axes a batch is split over

DEFAULT_RULES: tuple[tuple[str, Any], ...] = (
    # activations
    ("batch", BATCH_AXES),
    ("length", None),
    ("act_hidden", None),
    # parameters: the wide axes go to 'tensor', the model width to 'fsdp'
    ("vocab", "tensor"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("hidden", "fsdp"),
    ("embed", "fsdp"),
    ("layers", None),
)


def make_mesh(shape: Sequence[int], devices=None, slices: int = 1) -> jax.sharding.Mesh:
    """A ('data', 'fsdp', 'tensor') mesh of `devices` (default `jax.devices()`: a real backend;
    `albert_jax.train.topology` gives a TPU topology's compile-only devices); a -1 entry takes the
    remaining devices. `slices` > 1 (multi-slice TPU): 'data' spans the slices over the
    data-center network (DCN) and 'fsdp' / 'tensor' stay within a slice's interconnect (ICI),
    so only the once-per-step gradient reduction crosses slices."""
    devices = jax.devices() if devices is None else list(devices)
    shape = list(shape)
    if shape.count(-1) == 1:
        rest = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = len(devices) // rest
    if math.prod(shape) != len(devices):
        raise ValueError(f"mesh shape {tuple(shape)} does not cover the {len(devices)} devices")
    axis_types = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    if slices > 1:
        if shape[0] % slices:
            raise ValueError(
                f"mesh shape {tuple(shape)}: 'data' ({shape[0]}) must be a multiple of the "
                f"{slices} slices it spans"
            )
        from jax.experimental import mesh_utils

        ici = (shape[0] // slices, *shape[1:])
        grid = mesh_utils.create_hybrid_device_mesh(ici, (slices, 1, 1), devices)
        return jax.sharding.Mesh(grid, MESH_AXES, axis_types=axis_types)
    return jax.make_mesh(tuple(shape), MESH_AXES, axis_types=axis_types, devices=devices)


def logical_sharding(axes, shape, mesh, rules=DEFAULT_RULES) -> NamedSharding:
    """NamedSharding of one array from its logical axes; a dimension its mesh axes do not divide
    evenly stays replicated rather than failing deep inside XLA."""
    spec = nn.logical_to_mesh_axes(axes, rules)
    fixed = []
    for dim, mesh_axes in zip(shape, spec, strict=True):
        names = (
            () if mesh_axes is None else (mesh_axes,) if isinstance(mesh_axes, str) else mesh_axes
        )
        size = math.prod(mesh.shape[n] for n in names)
        fixed.append(mesh_axes if names and dim % size == 0 else None)
    return NamedSharding(mesh, PartitionSpec(*fixed))


def tree_shardings(boxed_tree, mesh, rules=DEFAULT_RULES):
    """Shardings for a tree of `nn.Partitioned` boxes (e.g. `jax.eval_shape(model.init, ...)`);
    unboxed leaves are replicated."""

    def one(leaf):
        if isinstance(leaf, nn.Partitioned):
            return logical_sharding(leaf.names, leaf.value.shape, mesh, rules)
        return NamedSharding(mesh, PartitionSpec())

    return jax.tree_util.tree_map(one, boxed_tree, is_leaf=lambda x: isinstance(x, nn.Partitioned))


def init_sharded(model: nn.Module, rng, mesh, rules=DEFAULT_RULES, seq_len: int = 8):
    """Initialize parameters directly into their shardings (nothing unsharded is materialized).
    Returns (params, shardings)."""
    ids = jnp.zeros((1, seq_len), jnp.int32)

    def init(rng):
        return nn.meta.unbox(model.init(rng, ids)["params"])

    boxed = jax.eval_shape(lambda r: model.init(r, ids)["params"], rng)
    shardings = tree_shardings(boxed, mesh, rules)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        params = jax.jit(init, out_shardings=shardings)(rng)
    return params, shardings


def batch_sharding(mesh) -> NamedSharding:
    """Batch-major inputs (any rank) split over ('data', 'fsdp') along their first axis."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def batch_shards(mesh_shape) -> int:
    """Devices a batch is split over; `mesh_shape` is a mesh's `.shape` or {axis name: size}."""
    return math.prod(int(mesh_shape[axis]) for axis in BATCH_AXES)

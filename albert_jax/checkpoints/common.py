"""What the HF and TF converters share: our parameter paths and shapes, the group re-layout of a
source whose layers use groups by another formula, and the checks that name every bad tensor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from flax import traverse_util

from albert_jax.checkpoints.errors import ConversionError
from albert_jax.model.config import AlbertConfig
from albert_jax.model.heads import param_shapes
from albert_jax.model.sharing import stacked_paths


def expected_shapes(
    config: AlbertConfig, head: dict[str, Any] | None = None
) -> dict[str, tuple[int, ...]]:
    """Flat 'a/b/c' path -> shape of every parameter of `heads.build_model(config, head)` (None:
    AlbertForPreTraining)."""
    return {k: tuple(v.shape) for k, v in flatten(param_shapes(config, head)).items()}


def flatten(tree: dict[str, Any]) -> dict[str, Any]:
    """{'a/b/c': leaf} of a nested dict (only dicts are nodes: a per-layer list is one leaf)."""
    return traverse_util.flatten_dict(tree, sep="/")


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """The nested dict of a {'a/b/c': leaf} dict (`flatten`'s inverse)."""
    return traverse_util.unflatten_dict(flat, sep="/")


def is_stacked(config: AlbertConfig, path: str) -> bool:
    """Whether the leaf has a leading layer/group axis (the model's 'layers' logical axis)."""
    return path in stacked_paths(config)


def layout_from_layer_groups(src_of_layer: list[int]) -> tuple[int, list[int], str | None]:
    """Our group count for a source whose layer i uses source group `src_of_layer[i]`, and for
    each of our groups the source group it copies. Keeps the source's sharing when `(i*G)//L`
    reproduces it; otherwise every layer gets its own copy (exact, but no longer tied) and a
    note says so."""
    L = len(src_of_layer)
    src = np.asarray(src_of_layer)
    g = len(np.unique(src))
    ours = (np.arange(L) * g) // L
    same_src = src[:, None] == src[None, :]
    if np.array_equal(same_src, ours[:, None] == ours[None, :]):
        return g, [int(src[np.argmax(ours == k)]) for k in range(g)], None
    note = (
        f"the source's layer->group map {src.tolist()} is not (i*G)//L for any G: "
        f"imported as the not-shared layout ({L} groups, one copy per layer)"
    )
    return L, [int(s) for s in src], note


def check_and_build(
    config: AlbertConfig,
    source_names: dict[str, list[str]],
    available: dict[str, tuple[int, ...]],
    load: Callable[[str], np.ndarray],
    transforms: dict[str, Callable[[np.ndarray], np.ndarray]],
    ignored: Callable[[str], bool],
    where: str,
    head: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Checks every source tensor our params need (present, right shape) and that nothing else is
    left over, then loads them. `source_names[path]` lists the source tensors of a path (one per
    group for grouped leaves, stacked in order); `transforms[path]` maps a source tensor to our
    orientation. Raises one ConversionError listing all missing, mis-shaped and unexpected names
    before reading any tensor data. `head`: the model the shapes come from (None: pretraining)."""
    shapes = expected_shapes(config, head)
    missing, misshaped, used = [], [], set()
    for path, names in source_names.items():
        want = shapes[path][1:] if is_stacked(config, path) else shapes[path]
        for name in names:
            used.add(name)
            if name not in available:
                missing.append(f"{name} (for {path})")
                continue
            probe = np.empty(available[name], np.uint8)  # shape-only: transforms are views
            got = transforms.get(path, lambda x: x)(probe).shape
            if tuple(got) != tuple(want):
                src_want = _src_shape(want, path, transforms)
                misshaped.append(f"{name}: shape {available[name]}, expected {src_want}")
    unexpected = sorted(n for n in available if n not in used and not ignored(n))
    problems = []
    if missing:
        problems.append("missing tensors:\n  " + "\n  ".join(missing))
    if misshaped:
        problems.append(
            "tensors whose shape disagrees with the config (config and weights do not match?):\n  "
            + "\n  ".join(misshaped)
        )
    if unexpected:
        problems.append("unexpected tensors:\n  " + "\n  ".join(unexpected))
    if problems:
        raise ConversionError(f"{where}: cannot convert exactly.\n" + "\n".join(problems))
    flat = {}
    for path, names in source_names.items():
        t = transforms.get(path, lambda x: x)
        arrays = []
        for name in names:
            a = t(load(name))
            if not np.all(np.isfinite(a)):
                raise ConversionError(f"{where}: tensor {name} has non-finite values")
            arrays.append(np.ascontiguousarray(a, dtype=np.float32))
        flat[path] = np.stack(arrays) if is_stacked(config, path) else arrays[0]
    return unflatten(flat)


def _src_shape(want, path, transforms) -> tuple[int, ...]:
    """The source-side shape that would map to `want` (our transforms are transposes)."""
    t = transforms.get(path)
    if t is None:
        return tuple(want)
    return tuple(t(np.empty(want, np.uint8)).shape)

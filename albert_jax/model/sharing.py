"""Cross-layer sharing as pure functions on parameter trees.

Under `encoder/attention` and `encoder/ffn` every leaf has a leading group axis when the sub-block
has G > 1 groups (layer i uses group `(i * G) // L`) and none when G = 1. Changing the layout is
therefore indexing along that axis: `unshare` turns ALBERT into BERT whose layers all start from
the shared weights ("ALBERT used as BERT"), and the model computes exactly what it did before.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from albert_jax.model.albert import AlbertModel
from albert_jax.model.config import AlbertConfig

SUB_BLOCKS = {"attention": "attention_groups", "ffn": "ffn_groups"}


def layer_groups(groups: int, num_layers: int) -> np.ndarray:
    """Group index of every layer application: `(i * G) // L`."""
    return (np.arange(num_layers) * groups) // num_layers


@functools.lru_cache(maxsize=64)
def stacked_paths(config: AlbertConfig) -> frozenset[str]:
    """Paths ('encoder/ffn/output/kernel') of the leaves with a leading layer/group axis, read
    from the logical axis names the model declares ('layers' first): the one source of truth
    for the optimizer's per-layer trust ratio and layer-wise learning rates."""
    import flax.linen as nn

    ids = jax.ShapeDtypeStruct((1, 1), np.int32)
    boxed = jax.eval_shape(lambda: AlbertModel(config).init(jax.random.key(0), ids))
    leaves = jax.tree_util.tree_leaves_with_path(
        boxed["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned)
    )
    return frozenset(
        "/".join(str(k.key) for k in path)
        for path, leaf in leaves
        if isinstance(leaf, nn.Partitioned) and leaf.names[:1] == ("layers",)
    )


def source_groups(src: int, dst: int, num_layers: int) -> np.ndarray:
    """For each target group, the one source group holding all of its layers (or a ValueError)."""
    src_of_layer, dst_of_layer = layer_groups(src, num_layers), layer_groups(dst, num_layers)
    result = np.zeros(dst, np.int32)
    for g in range(dst):
        sources = np.unique(src_of_layer[dst_of_layer == g])
        if len(sources) != 1:
            raise ValueError(
                f"cannot regroup {src} -> {dst} groups over {num_layers} layers: target group {g} "
                f"spans source groups {sources.tolist()} (it must lie inside one of them)"
            )
        result[g] = sources[0]
    return result


def regroup(
    params: dict[str, Any],
    config: AlbertConfig,
    attention_groups: int | None = None,
    ffn_groups: int | None = None,
) -> tuple[dict[str, Any], AlbertConfig]:
    """Re-lay the encoder's parameters for new group counts; each target group copies the source
    group that contains all of its layers. Returns (params, config) for the new layout."""
    targets = {"attention": attention_groups, "ffn": ffn_groups}
    new_config = config.replace(
        **{SUB_BLOCKS[k]: v for k, v in targets.items() if v is not None}
    )  # validates the new counts
    encoder = dict(params["encoder"])
    for block, field in SUB_BLOCKS.items():
        src, dst = getattr(config, field), getattr(new_config, field)
        if src == dst:
            continue
        index = source_groups(src, dst, config.num_layers)

        def relayout(leaf, src=src, dst=dst, index=index):
            stack = leaf if src > 1 else leaf[None]
            out = stack[index]
            return out if dst > 1 else out[0]

        encoder[block] = jax.tree_util.tree_map(relayout, encoder[block])
    return {**params, "encoder": encoder}, new_config


def unshare(params: dict[str, Any], config: AlbertConfig) -> tuple[dict[str, Any], AlbertConfig]:
    """The not-shared layout: every layer gets its own copy of the weights it used."""
    return regroup(params, config, attention_groups=config.num_layers, ffn_groups=config.num_layers)


# --- the per-layer view of a train state ---
def layer_view_paths(config: AlbertConfig) -> frozenset[str]:
    """The stacked leaves the trainer holds per layer: all of them for an unrolled encoder,
    none for a scanned one (the scan takes its weights stacked)."""
    return frozenset() if config.scan_layers else stacked_paths(config)


def split_layers(tree: dict[str, Any], paths: frozenset[str]) -> dict[str, Any]:
    """The per-layer view: each leaf at one of `paths` (a [G, ...] array, ShapeDtypeStruct or
    logical-axis box) becomes a tuple of its G slices, which the model reads without slicing
    (`model.grouped_param`). On CPU, XLA copies a slice of a stacked weight before its matmul
    and assembles the per-layer gradients back into a stacked one; held per layer, neither
    happens (docs/performance.md). `stack_layers` is the inverse."""
    if not paths:
        return tree
    from flax import traverse_util

    flat = traverse_util.flatten_dict(tree, sep="/")
    for path in paths & flat.keys():
        flat[path] = _split(flat[path])
    return traverse_util.unflatten_dict(flat, sep="/")


def _split(leaf):
    import flax.linen as nn

    if isinstance(leaf, nn.Partitioned):
        parts = _split(leaf.value)
        return tuple(leaf.replace(value=p, names=leaf.names[1:]) for p in parts)
    if isinstance(leaf, jax.ShapeDtypeStruct):
        return tuple(jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype) for _ in range(leaf.shape[0]))
    return tuple(leaf[i] for i in range(leaf.shape[0]))


def stack_layers(tree: dict[str, Any]) -> dict[str, Any]:
    """Every per-layer tuple (or list, as a checkpoint may return it) of `split_layers` stacked
    back into one array: the tree every checkpoint, export and conversion takes."""
    from flax import traverse_util

    def stack(xs):
        if all(isinstance(x, np.ndarray) for x in xs):
            return np.stack(xs)
        import jax.numpy as jnp

        return jnp.stack(xs)

    flat = traverse_util.flatten_dict(tree, sep="/")
    flat = {k: stack(v) if isinstance(v, list | tuple) else v for k, v in flat.items()}
    return traverse_util.unflatten_dict(flat, sep="/")


# --- how far unshared layers move from their shared start ---
@functools.lru_cache(maxsize=64)
def layer_ndims(config: AlbertConfig) -> dict[str, int]:
    """{'attention/query/kernel': 2, ...}: the rank of one layer's copy of each leaf under
    encoder/attention and encoder/ffn (its logical axes without a leading 'layers' axis), so
    that a leaf is read the same whether it carries a group axis or not."""
    import flax.linen as nn

    ids = jax.ShapeDtypeStruct((1, 1), np.int32)
    boxed = jax.eval_shape(lambda: AlbertModel(config).init(jax.random.PRNGKey(0), ids))
    out = {}
    for block in SUB_BLOCKS:
        leaves = jax.tree_util.tree_leaves_with_path(
            boxed["params"]["encoder"][block], is_leaf=lambda x: isinstance(x, nn.Partitioned)
        )
        for path, leaf in leaves:
            names = leaf.names if isinstance(leaf, nn.Partitioned) else (None,) * leaf.ndim
            rank = len(names) - (names[:1] == ("layers",))
            out["/".join([block, *(str(k.key) for k in path)])] = rank
    return out


def per_layer(leaf, rank: int, num_layers: int) -> np.ndarray:
    """[L, ...] float64 on the host: every layer's copy of one encoder leaf, whatever its
    layout: a per-layer tuple (`split_layers`), a [G, ...] stack (layer i has group
    `(i * G) // L`), or one shared array (rank `rank`, no group axis)."""
    if isinstance(leaf, list | tuple):
        stack = np.stack([np.asarray(x, np.float64) for x in leaf])
    else:
        stack = np.asarray(leaf, np.float64)
        stack = stack[None] if stack.ndim == rank else stack
    return stack[layer_groups(stack.shape[0], num_layers)]


def layer_drift(params: dict[str, Any], start: dict[str, Any], config: AlbertConfig) -> dict:
    """Per sub-block (attention, ffn) of the encoder: how far each layer has moved from its
    starting weights and how alike the layers still are.

    `distance` [L]: ||W_l - W0_l|| / ||W0_l||, the Frobenius norms over all of the sub-block's
    leaves of layer l (kernels, biases, LayerNorm); `similarity`: the mean over layer pairs
    l < m of the cosine between their flattened weights (1 while they are equal). `params` and
    `start` are parameter trees with an `encoder` (any layout, per-layer tuples included; the
    heads are ignored), host or device arrays. Computed in float64 on the host: fine-tuning
    moves weights by parts in a thousand, whose cosine float32 cannot tell from 1. For an
    unshared model started from a shared block every distance is 0 and the similarity 1 at
    step 0."""
    from flax import traverse_util

    L, ranks = config.num_layers, layer_ndims(config)
    out = {}
    for block in SUB_BLOCKS:
        now = traverse_util.flatten_dict(params["encoder"][block], sep="/")
        then = traverse_util.flatten_dict(start["encoder"][block], sep="/")
        moved, base, gram = np.zeros(L), np.zeros(L), np.zeros((L, L))
        for path, leaf in now.items():
            rank = ranks[f"{block}/{path}"]
            w = per_layer(leaf, rank, L).reshape(L, -1)
            w0 = per_layer(then[path], rank, L).reshape(L, -1)
            moved += np.sum(np.square(w - w0), axis=1)
            base += np.sum(np.square(w0), axis=1)
            gram += w @ w.T
        norms = np.sqrt(np.diagonal(gram))
        cosine = gram / np.maximum(np.outer(norms, norms), 1e-300)
        upper = cosine[np.triu_indices(L, 1)]
        out[block] = {
            "distance": np.sqrt(moved / np.maximum(base, 1e-300)),
            "similarity": float(upper.mean()) if upper.size else 1.0,
        }
    return out

"""Cross-layer sharing as pure functions on parameter trees.

Under `encoder/attention` and `encoder/ffn` every leaf has a leading axis of the sub-block's G >= 1
groups (layer i uses group `(i * G) // L`), in every layout and whether the encoder is scanned
or unrolled. Changing the layout is therefore indexing along that axis: `unshare` turns ALBERT into
BERT whose layers all start from the shared weights ("ALBERT used as BERT"), and the model computes
exactly what it did before.
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
        jax.tree_util.keystr(path, simple=True, separator="/")
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
        encoder[block] = jax.tree_util.tree_map(lambda leaf, i=index: leaf[i], encoder[block])
    return {**params, "encoder": encoder}, new_config


def unshare(params: dict[str, Any], config: AlbertConfig) -> tuple[dict[str, Any], AlbertConfig]:
    """The not-shared layout: every layer gets its own copy of the weights it used."""
    return regroup(params, config, attention_groups=config.num_layers, ffn_groups=config.num_layers)


# --- how far unshared layers move from their shared start ---
def per_layer(leaf, num_layers: int) -> np.ndarray:
    """[L, ...] float64 on the host: every layer's copy of one [G, ...] encoder leaf (layer i
    has group `(i * G) // L`)."""
    stack = np.asarray(leaf, np.float64)
    return stack[layer_groups(stack.shape[0], num_layers)]


def layer_drift(params: dict[str, Any], start: dict[str, Any], config: AlbertConfig) -> dict:
    """Per sub-block (attention, ffn) of the encoder: how far each layer has moved from its
    starting weights and how alike the layers still are.

    `distance` [L]: ||W_l - W0_l|| / ||W0_l||, the Frobenius norms over all of the sub-block's
    leaves of layer l (kernels, biases, LayerNorm); `similarity`: the mean over layer pairs l < m of
    the cosine between their flattened weights (1 while they are equal). `params` and `start` are
    parameter trees with an `encoder` (any layout; the heads are ignored), host or device arrays.
    Computed in float64 on the host: fine-tuning moves weights by parts in a thousand, whose cosine
    float32 cannot tell from 1. For an unshared model started from a shared block every distance is
    0 and the similarity 1 at step 0."""
    from flax import traverse_util

    L = config.num_layers
    out = {}
    for block in SUB_BLOCKS:
        now = traverse_util.flatten_dict(params["encoder"][block], sep="/")
        then = traverse_util.flatten_dict(start["encoder"][block], sep="/")
        moved, base, gram = np.zeros(L), np.zeros(L), np.zeros((L, L))
        for path, leaf in now.items():
            w = per_layer(leaf, L).reshape(L, -1)
            w0 = per_layer(then[path], L).reshape(L, -1)
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

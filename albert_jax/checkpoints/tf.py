"""Google TF1 ALBERT checkpoints (google-research/albert) -> our parameters.

TF_NAMES maps our paths to GA variable names (`{g}` = `group_{g}/inner_group_0`). TF kernels
equal our Dense kernels; only the SOP `output_weights` [2, H] is transposed. Optimizer slots
(`*/adam_m`, `*/adam_v`, LAMB's too) and `global_step` are skipped. GA's layer i uses group
`int(i / L * G)` and creates only the groups some layer uses; the import re-lays that onto
`(i*G)//L` exactly (`common.layout_from_layer_groups`). Activation names follow GA's code:
its "gelu" is the tanh approximation, i.e. our (and transformers') "gelu_new".
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

import numpy as np

from albert_jax.checkpoints.common import check_and_build, layout_from_layer_groups
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.checkpoints.tf_checkpoint import TFCheckpoint
from albert_jax.model.config import AlbertConfig

_T = "bert/encoder/transformer/group_{g}/inner_group_0/"
TF_NAMES = {  # our path -> GA variable name
    "embeddings/word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings/position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings/token_type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/LayerNorm/scale": "bert/embeddings/LayerNorm/gamma",
    "embeddings/LayerNorm/bias": "bert/embeddings/LayerNorm/beta",
    "encoder/projection/kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "encoder/projection/bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "encoder/attention/query/kernel": _T + "attention_1/self/query/kernel",
    "encoder/attention/query/bias": _T + "attention_1/self/query/bias",
    "encoder/attention/key/kernel": _T + "attention_1/self/key/kernel",
    "encoder/attention/key/bias": _T + "attention_1/self/key/bias",
    "encoder/attention/value/kernel": _T + "attention_1/self/value/kernel",
    "encoder/attention/value/bias": _T + "attention_1/self/value/bias",
    "encoder/attention/output/kernel": _T + "attention_1/output/dense/kernel",
    "encoder/attention/output/bias": _T + "attention_1/output/dense/bias",
    "encoder/attention/LayerNorm/scale": _T + "LayerNorm/gamma",
    "encoder/attention/LayerNorm/bias": _T + "LayerNorm/beta",
    "encoder/ffn/intermediate/kernel": _T + "ffn_1/intermediate/dense/kernel",
    "encoder/ffn/intermediate/bias": _T + "ffn_1/intermediate/dense/bias",
    "encoder/ffn/output/kernel": _T + "ffn_1/intermediate/output/dense/kernel",
    "encoder/ffn/output/bias": _T + "ffn_1/intermediate/output/dense/bias",
    "encoder/ffn/LayerNorm/scale": _T + "LayerNorm_1/gamma",
    "encoder/ffn/LayerNorm/bias": _T + "LayerNorm_1/beta",
    "pooler/kernel": "bert/pooler/dense/kernel",
    "pooler/bias": "bert/pooler/dense/bias",
    "mlm/transform/kernel": "cls/predictions/transform/dense/kernel",
    "mlm/transform/bias": "cls/predictions/transform/dense/bias",
    "mlm/LayerNorm/scale": "cls/predictions/transform/LayerNorm/gamma",
    "mlm/LayerNorm/bias": "cls/predictions/transform/LayerNorm/beta",
    "mlm/output_bias": "cls/predictions/output_bias",
    "sop/kernel": "cls/seq_relationship/output_weights",
    "sop/bias": "cls/seq_relationship/output_bias",
}
_TRANSPOSED = {"sop/kernel"}
_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}  # GA name -> ours (GA gelu = tanh form)
_GA_DEFAULTS = dict(  # google-research/albert modeling.AlbertConfig defaults
    embedding_size=128, hidden_size=4096, num_hidden_layers=12, num_hidden_groups=1,
    num_attention_heads=64, intermediate_size=16384, inner_group_num=1, down_scale_factor=1,
    hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    max_position_embeddings=512, type_vocab_size=16, initializer_range=0.02,
)  # fmt: skip
_SLOT = re.compile(r"/(adam_[mv]|lamb_[mv]|Adam(_1)?|Momentum)$")
_BRIGHTMART = ("bert/embeddings/word_embeddings_2", "bert/encoder/layer_shared/")


def is_tf_checkpoint(path: str) -> bool:
    return find_prefix(path, required=False) is not None


def find_prefix(path: str, required: bool = True) -> str | None:
    """The checkpoint prefix for SRC: a prefix itself, or a directory holding one (the one named
    by its `checkpoint` file, else the only / highest-step `*.index`)."""
    if os.path.isfile(path + ".index"):
        return path
    if not os.path.isdir(path):
        return None
    state = os.path.join(path, "checkpoint")
    if os.path.isfile(state):
        with open(state) as f:
            m = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), re.M)
        if m:
            prefix = os.path.join(path, os.path.basename(m.group(1)))
            if os.path.isfile(prefix + ".index"):
                return prefix
    prefixes = [p[: -len(".index")] for p in glob.glob(os.path.join(path, "*.index"))]
    if not prefixes:
        return None
    step = lambda p: int(m.group(1)) if (m := re.search(r"-(\d+)$", p)) else -1
    best = max(prefixes, key=step)
    if len(prefixes) > 1 and sum(step(p) == step(best) for p in prefixes) > 1:
        if required:
            raise ConversionError(
                f"{path}: several checkpoints {sorted(prefixes)}; pass one prefix"
            )
        return None
    return best


def find_config(prefix: str) -> str:
    d = os.path.dirname(prefix) or "."
    found = sorted(glob.glob(os.path.join(d, "albert_config*.json")))
    found = found or sorted(glob.glob(os.path.join(d, "*config*.json")))
    if len(found) != 1:
        raise ConversionError(
            f"{d}: expected exactly one albert_config*.json next to the checkpoint, found "
            f"{[os.path.basename(f) for f in found]}; pass the config with --config"
        )
    return found[0]


def config_from_tf(d: dict[str, Any], where: str) -> tuple[AlbertConfig, int]:
    """(our config with a placeholder layout, GA num_hidden_groups)."""
    c = {**_GA_DEFAULTS, **d}
    if "vocab_size" not in d:
        raise ConversionError(f"{where}: vocab_size is missing")
    if c.get("ln_type", "postln") != "postln":
        raise ConversionError(
            f"{where}: ln_type={c['ln_type']!r} is brightmart's own pre-LN variant, not Google's "
            "ALBERT; use the *_google releases of albert_zh instead"
        )
    if c["inner_group_num"] != 1:
        raise ConversionError(
            f"{where}: inner_group_num={c['inner_group_num']} (several blocks per layer) is not "
            "supported: this model applies one block per layer (inner_group_num=1)"
        )
    if c["down_scale_factor"] != 1:
        raise ConversionError(f"{where}: down_scale_factor={c['down_scale_factor']} unsupported")
    if c["hidden_act"] not in _ACTIVATIONS:
        raise ConversionError(
            f"{where}: hidden_act={c['hidden_act']!r} is not supported (GA names: "
            f"{sorted(_ACTIVATIONS)}; GA's 'gelu' is the tanh approximation)"
        )
    try:
        config = AlbertConfig(
            vocab_size=c["vocab_size"], embedding_size=c["embedding_size"],
            hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
            num_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
            hidden_act=_ACTIVATIONS[c["hidden_act"]],
            hidden_dropout=float(c["hidden_dropout_prob"]),
            attention_dropout=float(c["attention_probs_dropout_prob"]),
            max_position_embeddings=c["max_position_embeddings"],
            type_vocab_size=c["type_vocab_size"], layer_norm_eps=1e-12,
            initializer_range=float(c["initializer_range"]),
        )  # fmt: skip
    except ValueError as e:
        raise ConversionError(f"{where}: {e}") from e
    return config, c["num_hidden_groups"]


def load_tf(path: str, config_path: str | None = None) -> tuple[AlbertConfig, dict, list[str], str]:
    """(config, params, notes, prefix) from a Google TF1 ALBERT checkpoint."""
    prefix = find_prefix(path)
    if prefix is None:
        raise ConversionError(f"{path}: no TF checkpoint (*.index) found")
    ckpt = TFCheckpoint(prefix)
    names = ckpt.names()
    if any(n.startswith(_BRIGHTMART) for n in names):
        raise ConversionError(
            f"{prefix}: this is brightmart's own albert_zh layout (word_embeddings_2, "
            "layer_shared), which differs from Google's ALBERT architecture; use the *_google "
            "releases of albert_zh (e.g. albert_tiny_google_zh) instead"
        )
    config_path = config_path or find_config(prefix)
    with open(config_path) as f:
        config, tf_groups = config_from_tf(json.load(f), config_path)
    L = config.num_layers
    src_of_layer = [int(i / L * tf_groups) for i in range(L)]  # GA's formula, float included
    groups, src_groups, note = layout_from_layer_groups(src_of_layer)
    notes = [note] if note else []
    # GA creates the projection only when E != H; without it our model has none either.
    config = config.replace(attention_groups=groups, ffn_groups=groups)
    source, transforms = {}, {p: np.transpose for p in _TRANSPOSED}
    for p, name in TF_NAMES.items():
        if p.startswith("encoder/projection/") and not config.has_projection:
            continue
        source[p] = [name.format(g=g) for g in src_groups] if "{g}" in name else [name]

    def ignored(n: str) -> bool:
        return n == "global_step" or bool(_SLOT.search(n))

    shapes = {n: ckpt.shape(n) for n in names}
    params = check_and_build(config, source, shapes, ckpt.read, transforms, ignored, prefix)
    return config, params, notes, prefix

"""Hugging Face `transformers` ALBERT directories <-> our parameters.

HF_NAMES is the one name table, keyed by our parameter paths; `{g}` is the HF layer group. HF
Linear weights are [out, in] (transposed against our Dense kernels); the SOP weight is [2, H].
transformers picks layer i's group with `int(i / (L / G))` (a float formula that differs from
`(i*G)//L` for some (L, G)); the import re-lays such sources (`common.layout_from_layer_groups`)
and the export falls back to one group per layer, so outputs never change.

Heads (`albert_jax.model.heads`): no head is `AlbertForPreTraining`; a `sequence_classification` /
`token_classification` head is `AlbertForSequenceClassification` / `AlbertForTokenClassification`
(`classifier.weight` [N, H], `classifier.bias`, no `predictions.*` or `sop_classifier.*`), with
`id2label`/`label2id` from the head's labels, `classifier_dropout_prob`, and `problem_type:
"regression"` for a regression head. The whole head dict also rides along in config.json under
`albert_jax_head` (transformers keeps unknown keys), so ours -> HF -> ours gives it back exactly;
the HF fields win where they disagree with it. A `question_answering` head is
`AlbertForQuestionAnswering` (`qa_outputs.weight` [2, H], `qa_outputs.bias`); a `multiple_choice`
head `AlbertForMultipleChoice` (`classifier.weight` [1, H]: one score per option). transformers'
token classifier and QA model have no pooler: the export still writes ours (transformers reports it
as unused) so the round trip keeps it, and an import without one gets a zero pooler (never used by
that model's logits) and a note saying so.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np

from albert_jax import paths, provenance
from albert_jax.checkpoints.common import (
    check_and_build,
    flatten,
    is_stacked,
    layout_from_layer_groups,
)
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.model.config import AlbertConfig
from albert_jax.text.fast_tokenizer import write_fast_tokenizer
from albert_jax.text.tokenization import SentencePieceTokenizer, save_hf_tokenizer

_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.0."
HF_NAMES = {  # our path -> (HF name, transposed)
    "embeddings/word_embeddings": ("albert.embeddings.word_embeddings.weight", False),
    "embeddings/position_embeddings": ("albert.embeddings.position_embeddings.weight", False),
    "embeddings/token_type_embeddings": ("albert.embeddings.token_type_embeddings.weight", False),
    "embeddings/LayerNorm/scale": ("albert.embeddings.LayerNorm.weight", False),
    "embeddings/LayerNorm/bias": ("albert.embeddings.LayerNorm.bias", False),
    "encoder/projection/kernel": ("albert.encoder.embedding_hidden_mapping_in.weight", True),
    "encoder/projection/bias": ("albert.encoder.embedding_hidden_mapping_in.bias", False),
    "encoder/attention/query/kernel": (_LAYER + "attention.query.weight", True),
    "encoder/attention/query/bias": (_LAYER + "attention.query.bias", False),
    "encoder/attention/key/kernel": (_LAYER + "attention.key.weight", True),
    "encoder/attention/key/bias": (_LAYER + "attention.key.bias", False),
    "encoder/attention/value/kernel": (_LAYER + "attention.value.weight", True),
    "encoder/attention/value/bias": (_LAYER + "attention.value.bias", False),
    "encoder/attention/output/kernel": (_LAYER + "attention.dense.weight", True),
    "encoder/attention/output/bias": (_LAYER + "attention.dense.bias", False),
    "encoder/attention/LayerNorm/scale": (_LAYER + "attention.LayerNorm.weight", False),
    "encoder/attention/LayerNorm/bias": (_LAYER + "attention.LayerNorm.bias", False),
    "encoder/ffn/intermediate/kernel": (_LAYER + "ffn.weight", True),
    "encoder/ffn/intermediate/bias": (_LAYER + "ffn.bias", False),
    "encoder/ffn/output/kernel": (_LAYER + "ffn_output.weight", True),
    "encoder/ffn/output/bias": (_LAYER + "ffn_output.bias", False),
    "encoder/ffn/LayerNorm/scale": (_LAYER + "full_layer_layer_norm.weight", False),
    "encoder/ffn/LayerNorm/bias": (_LAYER + "full_layer_layer_norm.bias", False),
    "pooler/kernel": ("albert.pooler.weight", True),
    "pooler/bias": ("albert.pooler.bias", False),
    "mlm/transform/kernel": ("predictions.dense.weight", True),
    "mlm/transform/bias": ("predictions.dense.bias", False),
    "mlm/LayerNorm/scale": ("predictions.LayerNorm.weight", False),
    "mlm/LayerNorm/bias": ("predictions.LayerNorm.bias", False),
    "mlm/output_bias": ("predictions.bias", False),
    "sop/kernel": ("sop_classifier.classifier.weight", True),
    "sop/bias": ("sop_classifier.classifier.bias", False),
    "classifier/kernel": ("classifier.weight", True),
    "classifier/bias": ("classifier.bias", False),
}
# transformers class of each head type (no head: pretraining), and what each model lacks.
ARCHITECTURES = {
    "pretraining": "AlbertForPreTraining",
    "sequence_classification": "AlbertForSequenceClassification",
    "token_classification": "AlbertForTokenClassification",
    "question_answering": "AlbertForQuestionAnswering",
    "multiple_choice": "AlbertForMultipleChoice",
}
# A checkpoint without a head (None) that lacks the pretraining heads (an ELECTRA discriminator,
# an MLM-only run) is written as the transformers model that has what it has.
PARTIAL = {"masked_lm": "AlbertForMaskedLM", "backbone": "AlbertModel"}
_ABSENT = {  # top-level paths that a model of each type does not have
    "pretraining": ("classifier",),
    "sequence_classification": ("mlm", "sop"),
    "token_classification": ("mlm", "sop"),
    "question_answering": ("mlm", "sop"),
    "multiple_choice": ("mlm", "sop"),
    "masked_lm": ("classifier", "sop"),
    "backbone": ("classifier", "mlm", "sop"),
}
# Heads whose dense layer transformers names otherwise than `classifier`.
_HEAD_NAMES = {
    "question_answering": {
        "classifier/kernel": ("qa_outputs.weight", True),
        "classifier/bias": ("qa_outputs.bias", False),
    },
}
_NO_POOLER = ("token_classification", "question_answering", "masked_lm")  # transformers has none
HEAD_KEY = "albert_jax_head"  # our head dict, carried in config.json for an exact round trip
_POOLER = ("pooler/kernel", "pooler/bias")
# Tied copies and buffers that transformers may store; they carry no information of their own.
_IGNORED_SUFFIXES = ("predictions.decoder.weight", "predictions.decoder.bias", ".position_ids")
_ACTIVATIONS = ("gelu_new", "gelu", "relu")  # same meaning in transformers and in our model
_HF_DEFAULTS = dict(  # transformers AlbertConfig defaults (= albert-xxlarge)
    vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12,
    num_hidden_groups=1, num_attention_heads=64, intermediate_size=16384, inner_group_num=1,
    hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
    layer_norm_eps=1e-12, position_embedding_type="absolute",
)  # fmt: skip
WEIGHTS = "model.safetensors"
SHARDED_WEIGHTS = "model.safetensors.index.json"  # {"weight_map": {tensor: shard file}}
TORCH_WEIGHTS = "pytorch_model.bin"
FLAX_WEIGHTS = "flax_model.msgpack"  # transformers 4.x Flax models (FlaxAlbert*.save_pretrained)
WEIGHT_FILES = (WEIGHTS, SHARDED_WEIGHTS, TORCH_WEIGHTS, FLAX_WEIGHTS)  # the order they are read


def hf_layer_groups(num_layers: int, num_groups: int) -> list[int]:
    """transformers' group of each layer: `int(i / (L / G))`, float arithmetic included."""
    return [int(i / (num_layers / num_groups)) for i in range(num_layers)]


def is_hf_dir(path: str) -> bool:
    """A local directory with a transformers ALBERT config.json (never a bucket URI)."""
    if paths.is_uri(path):
        return False
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        return False
    try:
        with open(cfg) as f:
            return json.load(f).get("model_type") == "albert"
    except (OSError, ValueError):
        return False


# --- config --------------------------------------------------------------------------------------
def config_from_hf(d: dict[str, Any], where: str) -> tuple[AlbertConfig, int]:
    """(our config with a placeholder layout, HF num_hidden_groups)."""
    c = {**_HF_DEFAULTS, **d}
    if c["inner_group_num"] != 1:
        raise ConversionError(
            f"{where}: inner_group_num={c['inner_group_num']} (several blocks per layer) is not "
            "supported: this model applies one block per layer (inner_group_num=1)"
        )
    if c["position_embedding_type"] != "absolute":
        raise ConversionError(
            f"{where}: position_embedding_type={c['position_embedding_type']!r} is not supported"
        )
    if c["hidden_act"] not in _ACTIVATIONS:
        raise ConversionError(
            f"{where}: hidden_act={c['hidden_act']!r} is not supported (one of {_ACTIVATIONS})"
        )
    try:
        config = AlbertConfig(
            vocab_size=c["vocab_size"], embedding_size=c["embedding_size"],
            hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
            num_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
            hidden_act=c["hidden_act"], hidden_dropout=float(c["hidden_dropout_prob"]),
            attention_dropout=float(c["attention_probs_dropout_prob"]),
            max_position_embeddings=c["max_position_embeddings"],
            type_vocab_size=c["type_vocab_size"], layer_norm_eps=float(c["layer_norm_eps"]),
            initializer_range=float(c["initializer_range"]),
            embedding_projection_always=True,  # transformers always has the projection
        )  # fmt: skip
    except ValueError as e:
        raise ConversionError(f"{where}: {e}") from e
    groups = c["num_hidden_groups"]
    if not (isinstance(groups, int) and groups >= 1):
        raise ConversionError(f"{where}: num_hidden_groups must be a positive int, got {groups!r}")
    return config, groups


def _class(kind: str) -> str:
    return {**ARCHITECTURES, **PARTIAL}[kind]


def head_type(head: dict[str, Any] | None) -> str:
    return head["type"] if head else "pretraining"


def hf_names(head: dict[str, Any] | None) -> dict[str, tuple[str, bool]]:
    """HF_NAMES for the model of this head (the head's own dense layer renamed where needed)."""
    return {**HF_NAMES, **_HEAD_NAMES.get(head_type(head), {})}


def model_paths(head: dict[str, Any] | None, kind: str | None = None) -> list[str]:
    """Our paths in HF_NAMES that the model of this head (or `kind`, one of PARTIAL) has (the
    projection included)."""
    absent = _ABSENT[kind or head_type(head)]
    return [p for p in HF_NAMES if p.split("/")[0] not in absent]


def head_from_hf(d: dict[str, Any], where: str) -> dict[str, Any] | None:
    """Our head dict for a transformers config (None: a pretraining / backbone model)."""
    arch = (d.get("architectures") or [None])[0]
    kind = {v: k for k, v in {**ARCHITECTURES, **PARTIAL}.items()}.get(arch)
    if kind in (None, "pretraining", *PARTIAL):
        if arch is not None and arch.endswith(("Classification", "QuestionAnswering", "Choice")):
            raise ConversionError(
                f"{where}: architecture {arch} is not supported (heads: "
                f"{', '.join(ARCHITECTURES.values())})"
            )
        return None
    carried = d.get(HEAD_KEY) if isinstance(d.get(HEAD_KEY), dict) else {}
    head = {**carried, "type": kind}
    id2label = d.get("id2label")
    if id2label:  # transformers derives num_labels from it; keys are strings in config.json
        try:
            labels = [id2label[k] for k in sorted(id2label, key=int)]
        except (TypeError, ValueError) as e:
            raise ConversionError(f"{where}: id2label keys must be integers: {e}") from e
        if sorted(int(k) for k in id2label) != list(range(len(labels))):
            raise ConversionError(f"{where}: id2label keys are not 0..{len(labels) - 1}")
    else:
        labels = [f"LABEL_{i}" for i in range(int(d.get("num_labels", 2)))]
    head["num_labels"] = len(labels)
    if kind == "multiple_choice":  # one score per option whatever num_labels says
        head["num_labels"] = 1
        labels = ["LABEL_0"]
    old = carried.get("labels")
    if isinstance(old, list) and [str(x) for x in old] == labels:
        pass  # ours, possibly not strings (config.json turned them into names)
    elif labels != [f"LABEL_{i}" for i in range(len(labels))]:
        head["labels"] = labels
    else:  # transformers' placeholder names: no labels of our own
        head.pop("labels", None)
    dropout = d.get("classifier_dropout_prob", 0.1)
    if dropout is None:  # transformers' token classifier then uses the hidden dropout
        dropout = d.get("hidden_dropout_prob", _HF_DEFAULTS["hidden_dropout_prob"])
    if kind == "question_answering" and "classifier_dropout" not in carried:
        head["classifier_dropout"] = 0.0  # transformers' qa_outputs has no dropout before it
    elif "classifier_dropout" in carried or float(dropout) != 0.1:  # 0.1: the heads' default
        head["classifier_dropout"] = float(dropout)
    if d.get("problem_type") == "regression":
        head["task_type"] = "regression"
    return head


def config_to_hf(
    config: AlbertConfig, num_groups: int, head: dict[str, Any] | None = None, kind=None
) -> dict[str, Any]:
    out = _backbone_config_to_hf(config, num_groups, head)
    if kind in PARTIAL:
        out["architectures"] = [PARTIAL[kind]]
    if not head:
        return out
    n = head["num_labels"]
    names = [str(x) for x in head.get("labels") or [f"LABEL_{i}" for i in range(n)]]
    out.update(
        id2label={str(i): name for i, name in enumerate(names)},
        label2id={name: i for i, name in enumerate(names)},
        num_labels=n,
        classifier_dropout_prob=float(head.get("classifier_dropout", 0.1)),
    )
    out[HEAD_KEY] = head
    if head.get("task_type") == "regression":
        out["problem_type"] = "regression"
    return out


def _backbone_config_to_hf(config: AlbertConfig, num_groups: int, head) -> dict[str, Any]:
    return {
        "architectures": [ARCHITECTURES[head_type(head)]],
        "model_type": "albert",
        "vocab_size": config.vocab_size,
        "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_hidden_groups": num_groups,
        "inner_group_num": 1,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "classifier_dropout_prob": 0.1,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
        "torch_dtype": "float32",
    }


# --- tensors -------------------------------------------------------------------------------------
class _SafetensorsFile:
    def __init__(self, path: str):
        from safetensors import safe_open

        self.path = path
        try:
            self._f = safe_open(path, framework="np")
            self.shapes = {k: tuple(self._f.get_slice(k).get_shape()) for k in self._f.keys()}
        except Exception as e:  # SafetensorError, OSError: truncated or not safetensors
            raise ConversionError(f"cannot read {path} (truncated or corrupted?): {e}") from e

    def load(self, name: str) -> np.ndarray:
        try:
            return self._f.get_tensor(name)
        except Exception as e:
            raise ConversionError(f"cannot read tensor {name} from {self.path}: {e}") from e


class _TorchFile:
    def __init__(self, path: str):
        try:
            import torch
        except ImportError as e:
            raise ConversionError(
                f"{path} is a PyTorch pickle and reading it needs torch: "
                "`pip install 'albert-jax[torch]'` (or convert it to model.safetensors)"
            ) from e
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            raise ConversionError(f"cannot read {path} (truncated or corrupted?): {e}") from e
        self.tensors = {k: v.detach().float().numpy() for k, v in state.items()}
        self.shapes = {k: tuple(v.shape) for k, v in self.tensors.items()}

    def load(self, name: str) -> np.ndarray:
        return self.tensors[name]


class _ShardedSafetensors:
    """model.safetensors.index.json: the tensors split across shard files (its `weight_map`
    names each tensor's file), as transformers saves a model over `max_shard_size`."""

    def __init__(self, index: str):
        try:
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            assert isinstance(weight_map, dict) and weight_map
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
            raise ConversionError(
                f"cannot read {index}: not a safetensors index with a weight_map ({e!r})"
            ) from e
        self.path = index
        directory = os.path.dirname(index)
        files = {}
        for shard in sorted(set(weight_map.values())):
            shard_path = os.path.join(directory, shard)
            if os.path.basename(shard) != shard or not os.path.isfile(shard_path):
                raise ConversionError(
                    f"{shard_path}: shard missing (named in {index}, which maps "
                    f"{sum(v == shard for v in weight_map.values())} tensors to it)"
                )
            files[shard] = _SafetensorsFile(shard_path)
        self._file_of, self.shapes = {}, {}
        for name, shard in weight_map.items():
            if name not in files[shard].shapes:
                raise ConversionError(
                    f"{files[shard].path} has no tensor {name}, which {index} maps to it"
                )
            self._file_of[name] = files[shard]
            self.shapes[name] = files[shard].shapes[name]

    def load(self, name: str) -> np.ndarray:
        return self._file_of[name].load(name)


class _FlaxMsgpack:
    """flax_model.msgpack: the parameter tree transformers' Flax ALBERT models save. Its module
    names are the PyTorch model's (both mirror the same ALBERT modules: `albert/encoder/
    albert_layer_groups/{g}/albert_layers/0/attention/query/...`, the layer lists keyed "0",
    "1", ...), so each leaf is given its PyTorch name and layout and read like the other files:
    a Dense `kernel` [in, out] is the Linear `weight` transposed, an Embed `embedding` and a
    LayerNorm `scale` are the `weight`, a `bias` is the `bias` (transformers' own Flax <-> PyTorch
    conversion renames them so). tests/fixtures/flax_msgpack holds one that transformers 4.57.6
    wrote (tests/fixtures/make_flax_msgpack.py)."""

    _RENAME = {"kernel": "weight", "embedding": "weight", "scale": "weight", "bias": "bias"}

    def __init__(self, path: str):
        from flax import serialization
        from flax.traverse_util import flatten_dict

        self.path = path
        try:
            with open(path, "rb") as f:
                tree = serialization.msgpack_restore(f.read())
            flat = flatten_dict(tree)
        except Exception as e:  # msgpack's and flax's own errors: truncated or not a msgpack
            raise ConversionError(f"cannot read {path} (truncated or corrupted?): {e}") from e
        self.tensors = {}
        for keys, leaf in flat.items():
            keys = tuple(map(str, keys))
            if keys[-1] not in self._RENAME or not hasattr(leaf, "shape"):
                raise ConversionError(f"{path}: unexpected entry {'/'.join(keys)} in the tree")
            a = np.asarray(leaf, np.float32)
            if keys[-1] == "kernel":
                if a.ndim != 2:
                    raise ConversionError(f"{path}: {'/'.join(keys)} is not a 2-D Dense kernel")
                a = a.T
            self.tensors[".".join((*keys[:-1], self._RENAME[keys[-1]]))] = a
        self.shapes = {k: tuple(v.shape) for k, v in self.tensors.items()}

    def load(self, name: str) -> np.ndarray:
        return self.tensors[name]


def _open_weights(path: str):
    readers = (_SafetensorsFile, _ShardedSafetensors, _TorchFile, _FlaxMsgpack)
    for name, reader in zip(WEIGHT_FILES, readers, strict=True):
        if os.path.exists(os.path.join(path, name)):
            return reader(os.path.join(path, name))
    raise ConversionError(
        f"{path}: has config.json but no weights ({', '.join(WEIGHT_FILES[:-1])} or "
        f"{WEIGHT_FILES[-1]})"
    )


def load_hf(path: str) -> tuple[AlbertConfig, dict[str, Any], list[str], dict[str, Any] | None]:
    """(config, params, notes, head) from a transformers ALBERT directory."""
    where = os.path.join(path, "config.json")
    with open(where) as f:
        hf_config = json.load(f)
    config, hf_groups = config_from_hf(hf_config, where)
    head = head_from_hf(hf_config, where)
    weights = _open_weights(path)
    src_of_layer = hf_layer_groups(config.num_layers, hf_groups)
    groups, src_groups, note = layout_from_layer_groups(src_of_layer)
    notes = [note] if note else []
    unused = sorted(set(range(hf_groups)) - set(src_of_layer))
    if unused:
        notes.append(f"HF groups {unused} are never applied by any layer: dropped")
    config = config.replace(attention_groups=groups, ffn_groups=groups)
    arch = (hf_config.get("architectures") or [None])[0]
    kind = {v: k for k, v in PARTIAL.items()}.get(arch) if head is None else None
    # transformers' AlbertModel (no heads) saves without the "albert." prefix.
    prefix = "" if any(k.startswith("albert.") for k in weights.shapes) else "albert."

    def source(name: str) -> str:
        return name[len(prefix) :] if prefix and name.startswith(prefix) else name

    # transformers' token classifier and QA model have no pooler; ours needs one (unused).
    table = hf_names(head)
    model = kind or head_type(head)
    zero_pooler = model in _NO_POOLER and not any(
        source(table[p][0]) in weights.shapes for p in _POOLER
    )
    if zero_pooler:
        notes.append(
            f"no pooler (transformers' {_class(model)} has none): set to zeros; "
            "the head never uses it"
        )
    names, transforms = {}, {}
    for path_ in model_paths(head, kind):
        name, transposed = table[path_]
        if path_.startswith("encoder/projection/") and not config.has_projection:
            continue
        if zero_pooler and path_ in _POOLER:
            continue
        grouped = [name.format(g=g) for g in src_groups] if "{g}" in name else [name]
        names[path_] = [source(n) for n in grouped]
        if transposed:
            transforms[path_] = np.transpose
    dead = tuple(source(_LAYER.format(g=g)) for g in unused)

    def ignored(n: str) -> bool:
        return n.endswith(_IGNORED_SUFFIXES) or (bool(dead) and n.startswith(dead))

    params = check_and_build(
        config, names, weights.shapes, weights.load, transforms, ignored, weights.path, head
    )
    if zero_pooler:
        H = config.hidden_size
        params["pooler"] = {"kernel": np.zeros((H, H), np.float32), "bias": np.zeros(H, np.float32)}
    return config, params, notes, head


# --- export --------------------------------------------------------------------------------------
def hf_tensors(
    config: AlbertConfig, params: dict[str, Any], head: dict[str, Any] | None = None
) -> tuple[dict, dict, list[str]]:
    """(HF config dict, HF state dict, notes) for our (config, params) of the model `head`
    describes (None: AlbertForPreTraining)."""
    if head_type(head) not in ARCHITECTURES:  # e.g. relation_extraction: no transformers class
        raise ConversionError(
            f"a {head_type(head)!r} head cannot be written for transformers, which has no ALBERT "
            f"model for it (it has {', '.join(ARCHITECTURES.values())}); keep our format "
            "(--to albert_jax)"
        )
    if config.attention_groups != config.ffn_groups:
        raise ConversionError(
            f"layout {config.layout!r} cannot be written for transformers: it has one group "
            "count for attention and FFN (num_hidden_groups); regroup first "
            "(e.g. `--unshare`, which gives the not-shared layout)"
        )
    L, notes = config.num_layers, []
    ours = [(i * config.attention_groups) // L for i in range(L)]
    hf_groups = config.attention_groups
    if hf_layer_groups(L, hf_groups) != ours:
        hf_groups = L  # int(i / (L / L)) == i: always exact
        notes.append(
            f"transformers' group formula int(i / (L / G)) differs from (i*G)//L for "
            f"L={L}, G={config.attention_groups}: written with one group per layer"
        )
    # For each HF group, the one of our groups that its layers use.
    our_of_hf = {h: ours[i] for i, h in enumerate(hf_layer_groups(L, hf_groups))}
    flat = flatten(params)
    if not config.has_projection:
        H = config.hidden_size
        flat["encoder/projection/kernel"] = np.eye(H, dtype=np.float32)
        flat["encoder/projection/bias"] = np.zeros(H, np.float32)
        notes.append("E == H without a projection: wrote the identity projection (exact)")
    kind = None
    if head is None:  # the pretraining heads it has decide the transformers model
        has = {h for h in ("mlm", "sop") if any(k.startswith(h + "/") for k in flat)}
        kind = {frozenset({"mlm", "sop"}): None, frozenset({"mlm"}): "masked_lm"}.get(
            frozenset(has), "backbone"
        )
        if has == {"sop"}:
            notes.append("sop/* left out: transformers has no ALBERT model with SOP alone")
        if kind:
            notes.append(f"no {' or '.join(sorted({'mlm', 'sop'} - has))} head: {PARTIAL[kind]}")
    paths = model_paths(head, kind)
    missing = sorted(set(paths) - set(flat))
    if missing:
        raise ConversionError(f"cannot export: parameters missing: {missing}")
    if (kind or head_type(head)) in _NO_POOLER:
        notes.append(
            f"albert.pooler.* written although transformers' {_class(kind or head_type(head))} "
            "has no pooler (it reports them as unused): kept so that converting back is exact"
        )
    table = hf_names(head)
    tensors = {}
    for path in paths:
        name, transposed = table[path]
        leaf = np.asarray(flat[path], np.float32)
        for h in sorted(our_of_hf) if "{g}" in name else [None]:
            a = leaf
            if h is not None and is_stacked(config, path):
                a = leaf[our_of_hf[h]]
            a = a.T if transposed else a
            tensors[name.format(g=h)] = np.ascontiguousarray(a)
    return config_to_hf(config, hf_groups, head, kind), tensors, notes


def write_hf(
    out_dir: str,
    config: AlbertConfig,
    params: dict[str, Any],
    tokenizer=None,
    head: dict[str, Any] | None = None,
):
    """Writes config.json + model.safetensors (+ tokenizer files: spiece.model with
    tokenizer.json, transformers' fast tokenizer, or vocab.txt) into `out_dir` (a new, empty
    directory: the caller makes it atomic). Returns the notes."""
    from safetensors.numpy import save_file

    hf_config, tensors, notes = hf_tensors(config, params, head)
    config_file, weights = os.path.join(out_dir, "config.json"), os.path.join(out_dir, WEIGHTS)
    with open(config_file, "w") as f:
        json.dump(hf_config, f, indent=2, sort_keys=True)
    save_file(tensors, weights, metadata={"format": "pt"})
    shutil.copymode(config_file, weights)  # safetensors makes it 0600: what the umask allows
    if tokenizer is not None:
        save_hf_tokenizer(tokenizer, out_dir)
        if isinstance(tokenizer, SentencePieceTokenizer):  # the fast tokenizer, ready to load
            write_fast_tokenizer(tokenizer, out_dir)
    with open(os.path.join(out_dir, provenance.FILE), "w") as f:  # transformers ignores it
        json.dump(provenance.collect(), f, indent=2, sort_keys=True)
    return notes

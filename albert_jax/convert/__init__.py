"""Checkpoint conversion: Hugging Face and Google TF1 ALBERT -> ours, ours -> Hugging Face.

`load_source(src)` detects what SRC is (our checkpoint, a transformers directory, a Google TF1
checkpoint) and returns its config, parameters and tokenizer; `convert(src, out, ...)` writes it
as our checkpoint or as a transformers directory, atomically, after every check has passed.
Conversions are exact: a source that cannot be represented raises ConversionError (naming the
tensors or settings at fault) instead of being approximated; no parameter is ever initialized.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from albert_jax.config import AlbertConfig
from albert_jax.convert.errors import ConversionError

__all__ = ["ConversionError", "Source", "convert", "detect", "load_source"]


@dataclasses.dataclass
class Source:
    config: AlbertConfig
    params: dict[str, Any]
    tokenizer: Any = None
    format: str = ""
    location: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)


def detect(src: str) -> str:
    """'albert_jax', 'hf' or 'tf' for SRC, or a ConversionError saying what was looked for."""
    from albert_jax import checkpoint
    from albert_jax.convert import hf, tf

    if not os.path.exists(src) and not os.path.exists(src + ".index"):
        raise ConversionError(f"{src}: no such file or directory")
    if os.path.isdir(src) and checkpoint.is_checkpoint(src):
        return "albert_jax"
    if os.path.isdir(src) and hf.is_hf_dir(src):
        return "hf"
    if tf.is_tf_checkpoint(src):
        return "tf"
    raise ConversionError(
        f"{src}: unknown format. Expected an albert_jax checkpoint (checkpoint.json + params/), "
        "a transformers ALBERT directory (config.json with model_type 'albert' + "
        "model.safetensors or pytorch_model.bin), or a Google TF1 checkpoint "
        "(albert_config.json + model.ckpt-N.index/.data-*)"
    )


def load_source(src: str, config_path: str | None = None) -> Source:
    from albert_jax import checkpoint
    from albert_jax.convert import hf, tf
    from albert_jax.tokenization import TokenizerError, find_tokenizer

    src = os.fspath(src)
    fmt = detect(src)
    if fmt == "albert_jax":
        try:
            config, params = checkpoint.load(src)
            tokenizer = checkpoint.load_tokenizer(src)
        except (checkpoint.CheckpointError, TokenizerError) as e:
            raise ConversionError(str(e)) from e
        return Source(config, params, tokenizer, fmt, src)
    if fmt == "hf":
        config, params, notes = hf.load_hf(src)
        location, tok_dir = src, src
    else:
        config, params, notes, location = tf.load_tf(src, config_path)
        tok_dir = os.path.dirname(location) or "."
    try:
        tokenizer = find_tokenizer(tok_dir)
    except TokenizerError as e:
        raise ConversionError(str(e)) from e
    if tokenizer is not None:
        if tokenizer.vocab_size != config.vocab_size:
            raise ConversionError(
                f"{tok_dir}: tokenizer has {tokenizer.vocab_size} entries but the model's "
                f"vocab_size is {config.vocab_size}"
            )
        if hasattr(tokenizer, "check_special_ids"):
            try:
                tokenizer.check_special_ids()
            except TokenizerError:
                notes.append(
                    f"SentencePiece special ids {tokenizer.special_ids()} differ from ALBERT's "
                    "conventions: the tokenizer is kept, but pretraining code assumes them"
                )
    return Source(config, params, tokenizer, fmt, location, notes)


def describe(config: AlbertConfig) -> str:
    c = config
    return (
        f"V={c.vocab_size} E={c.embedding_size} H={c.hidden_size} L={c.num_layers} "
        f"heads={c.num_heads} I={c.intermediate_size} act={c.hidden_act} "
        f"layout={c.layout} (attention_groups={c.attention_groups}, ffn_groups={c.ffn_groups})"
        f"{' projection' if c.has_projection else ''}"
    )


def convert(
    src: str,
    out: str,
    *,
    to: str = "albert_jax",
    unshare: bool = False,
    config_path: str | None = None,
) -> list[str]:
    """Reads SRC, optionally unshares it, writes OUT (our format or 'hf'); returns report lines."""
    import numpy as np

    from albert_jax import checkpoint, sharing
    from albert_jax.convert import hf

    if to not in ("albert_jax", "hf"):
        raise ConversionError(f"unknown output format {to!r} (albert_jax or hf)")
    source = load_source(src, config_path)
    n = sum(int(np.size(x)) for x in _leaves(source.params))
    report = [f"read {source.format} checkpoint {source.location}: {n:,} parameters"]
    report.append(f"  config: {describe(source.config)}")
    tok = source.tokenizer
    report.append(
        f"  tokenizer: {type(tok).__name__} ({tok.vocab_size} entries)"
        if tok
        else "  tokenizer: none"
    )
    report += [f"  note: {x}" for x in source.notes]
    config, params = source.config, source.params
    if unshare:
        params, config = sharing.unshare(params, config)
        report.append(f"unshared: layout {source.config.layout} -> {config.layout}")
    info = {"source": os.path.abspath(src), "source_format": source.format}
    if to == "albert_jax":
        checkpoint.save(out, config, params, tokenizer=tok, info=info)
        notes = []
    else:
        notes = checkpoint.write_atomically(
            out, lambda tmp: hf.write_hf(tmp, config, params, tokenizer=tok)
        )
    report.append(f"wrote {to} checkpoint {out}: {describe(config)}")
    report += [f"  note: {x}" for x in notes]
    return report


def _leaves(tree):
    for v in tree.values():
        yield from (_leaves(v) if isinstance(v, dict) else [v])

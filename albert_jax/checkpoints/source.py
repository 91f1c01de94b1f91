"""Checkpoint conversion: Hugging Face and Google TF1 ALBERT -> ours, ours -> Hugging Face.

`load_source(src)` detects what SRC is (our checkpoint, a transformers directory or a Google TF1
checkpoint: `FORMATS`) and returns its config, parameters, tokenizer and head as a `Source`;
`write_converted(source, src, out, ...)` writes a Source as our checkpoint or as a transformers
directory, atomically, after every check has passed (`check_out`: what OUT may be). Conversions
are exact: a source that cannot be represented raises ConversionError (naming the tensors or
settings at fault) instead of being approximated; no parameter is ever initialized (one documented
exception: the pooler that transformers' token classifier lacks, see `hf`).

A pretraining workdir, the trainer's own output, is read one layer up: `albert_jax.train.workdir`
adds it to `FORMATS` and holds the readers of any starting point (`load_source`, `read_config`,
`read_tokenizer`); `python -m albert_jax.convert` (`albert_jax.convert.convert`) is the
conversion of any of them.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.checkpoints import checkpoint, hf, tf
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.model import sharing
from albert_jax.model.config import AlbertConfig
from albert_jax.text.tokenization import TokenizerError, find_tokenizer

__all__ = [
    "FORMATS",
    "ConversionError",
    "Source",
    "check_out",
    "describe",
    "detect",
    "load_format",
    "load_source",
    "write_converted",
]


@dataclasses.dataclass
class Source:
    config: AlbertConfig
    params: dict[str, Any]
    tokenizer: Any = None
    format: str = ""
    location: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    head: dict[str, Any] | None = None  # albert_jax.model.heads dict; None: pretraining / backbone
    step: int | None = None  # workdir sources: the training step the parameters are from


# The formats read here, in the order they are tried: (name, is it PATH?, what it looks like).
# Each check is a cheap look at the files of PATH, resolved (`detect`); the reading itself takes
# SRC as given (its location and messages name it so). `albert_jax.train.workdir.FORMATS` inserts
# the pretraining workdir before "tf".
Format = tuple[str, Callable[[str], bool], str]
FORMATS: tuple[Format, ...] = (
    (
        "albert_jax",
        checkpoint.is_checkpoint,
        "an albert_jax checkpoint (checkpoint.json + params/)",
    ),
    (
        "hf",
        hf.is_hf_dir,
        "a transformers ALBERT directory (config.json with model_type 'albert' + "
        "model.safetensors, model.safetensors.index.json with its shards, pytorch_model.bin "
        "or flax_model.msgpack)",
    ),
    (
        "tf",
        tf.is_tf_checkpoint,
        "a Google TF1 checkpoint (albert_config.json + model.ckpt-N.index/.data-*)",
    ),
)


def detect(src: str, formats: tuple[Format, ...] = FORMATS, *, path: str | None = None) -> str:
    """The name of the first of `formats` that SRC is, or a ConversionError saying what was
    looked for. The checks look at PATH, SRC resolved (`paths.resolve`: done here unless the
    caller has done it); SRC must exist as given."""

    if not epath.Path(src).exists() and not epath.Path(src + ".index").exists():
        raise ConversionError(f"{src}: no such file or directory")
    path = paths.resolve(src) if path is None else path
    for name, is_format, _ in formats:
        if is_format(path):
            return name
    expected = [what for _, _, what in formats]
    raise ConversionError(
        f"{src}: unknown format. Expected {', '.join(expected[:-1])}, or {expected[-1]}"
    )


def load_source(src: str, config_path: str | None = None) -> Source:
    """Config, parameters, tokenizer and head of SRC, one of `FORMATS` (detected); `config_path`:
    a TF1 checkpoint's albert_config.json when it is not next to the checkpoint."""

    src = os.fspath(src)
    return load_format(detect(src), src, config_path)


def load_format(fmt: str, src: str, config_path: str | None = None) -> Source:
    """SRC read as `fmt` ('albert_jax', 'hf' or 'tf', as `detect` named it). Our checkpoints hold
    their tokenizer and head; a transformers or TF1 source takes the tokenizer found beside it
    (`_with_tokenizer`)."""

    if fmt == "albert_jax":
        return _load_ours(src)
    if fmt == "hf":
        source, tok_dir = _load_hf(src), src
    else:
        source = _load_tf(src, config_path)
        tok_dir = os.path.dirname(source.location) or "."
    return _with_tokenizer(source, tok_dir)


def _load_ours(src: str) -> Source:
    try:
        config, params = checkpoint.load(src)
        head = checkpoint.load_head(src)
        tokenizer = checkpoint.model_tokenizer(src)
    except (checkpoint.CheckpointError, TokenizerError) as e:
        raise ConversionError(str(e)) from e
    return Source(config, params, tokenizer, "albert_jax", src, head=head)


def _load_hf(src: str) -> Source:
    config, params, notes, head = hf.load_hf(src)
    try:
        head = checkpoint.normalize_head(head, where=os.path.join(src, "config.json"))
    except checkpoint.CheckpointError as e:
        raise ConversionError(str(e)) from e
    return Source(config, params, None, "hf", src, notes, head=head)


def _load_tf(src: str, config_path: str | None) -> Source:
    config, params, notes, prefix = tf.load_tf(src, config_path)
    return Source(config, params, None, "tf", prefix, notes)


def _with_tokenizer(source: Source, tok_dir: str) -> Source:
    """SOURCE with the tokenizer found in TOK_DIR (or none), checked against its vocabulary."""
    try:
        tokenizer = find_tokenizer(tok_dir)
    except TokenizerError as e:
        raise ConversionError(str(e)) from e
    if tokenizer is not None:
        if tokenizer.vocab_size != source.config.vocab_size:
            raise ConversionError(
                f"{tok_dir}: tokenizer has {tokenizer.vocab_size} entries but the model's "
                f"vocab_size is {source.config.vocab_size}"
            )
        if hasattr(tokenizer, "check_special_ids"):
            try:
                tokenizer.check_special_ids()
            except TokenizerError:
                source.notes.append(
                    f"SentencePiece special ids {tokenizer.special_ids()} differ from ALBERT's "
                    "conventions: the tokenizer is kept, but pretraining code assumes them"
                )
    source.tokenizer = tokenizer
    return source


def describe(config: AlbertConfig) -> str:
    c = config
    return (
        f"V={c.vocab_size} E={c.embedding_size} H={c.hidden_size} L={c.num_layers} "
        f"heads={c.num_heads} I={c.intermediate_size} act={c.hidden_act} "
        f"layout={c.layout} (attention_groups={c.attention_groups}, ffn_groups={c.ffn_groups})"
        f"{' projection' if c.has_projection else ''}"
    )


OUT_FORMATS = ("albert_jax", "hf")


def write_converted(
    source: Source,
    src: str,
    out: str,
    *,
    to: str = "albert_jax",
    unshare: bool = False,
    overwrite: bool = False,
) -> list[str]:
    """Writes SOURCE (read from SRC), optionally unshared, as OUT (our format or 'hf'); returns
    report lines. OUT is replaced only if `check_out` allows it, checked once the replacement is
    written, just before it takes OUT's place (`albert_jax.convert.convert` also checks first,
    before SRC is read)."""

    if to not in OUT_FORMATS:
        raise ConversionError(f"unknown output format {to!r} (albert_jax or hf)")
    n = sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(source.params))
    report = [f"read {source.format} checkpoint {source.location}: {n:,} parameters"]
    report.append(f"  config: {describe(source.config)}")
    tok = source.tokenizer
    report.append(
        f"  tokenizer: {type(tok).__name__} ({tok.vocab_size} entries)"
        if tok
        else "  tokenizer: none"
    )
    head = source.head
    heads = [h for h in ("mlm", "sop") if h in source.params]
    pretraining = f"pretraining ({' + '.join(heads)})" if heads else "none (backbone only)"
    report.append(f"  head: {json.dumps(head, sort_keys=True) if head else pretraining}")
    report += [f"  note: {x}" for x in source.notes]
    config, params = source.config, source.params
    if unshare:
        params, config = sharing.unshare(params, config)
        report.append(f"unshared: layout {source.config.layout} -> {config.layout}")
    info = {"source": paths.resolve(src), "source_format": source.format}
    if source.step is not None:
        info["step"] = source.step
    if to == "albert_jax":
        head = checkpoint.check(out, config, params, tok, head)

    def write(tmp: str) -> list[str]:
        if to == "albert_jax":
            checkpoint.write(tmp, config, params, tokenizer=tok, info=info, head=head)
            notes = []
        else:
            notes = hf.write_hf(tmp, config, params, tokenizer=tok, head=head)
        files = sorted(p.name for p in epath.Path(tmp).iterdir())
        epath.Path(tmp, MARKER).write_text(json.dumps({"files": files, **info}, indent=2))
        check_out(src, out, overwrite)  # again: OUT may have changed while this was written
        return notes

    notes = checkpoint.write_atomically(out, write)
    report.append(f"wrote {to} checkpoint {out}: {describe(config)}")
    report += [f"  note: {x}" for x in notes]
    return report


MARKER = ".albert_jax_convert.json"  # in every OUT convert writes: {"files": [...], "source"}


def check_out(src: str, out: str, overwrite: bool = False, *, to: str = "albert_jax") -> None:
    """A ConversionError unless OUT may be replaced by a conversion of SRC into format TO (one of
    OUT_FORMATS): never SRC itself, a path inside it or one that holds it (whatever `overwrite`
    says); an existing file or a directory holding anything but what convert wrote there
    (MARKER's list) only with `overwrite`: it may be the user's own files, or a pretraining
    workdir."""
    if to not in OUT_FORMATS:
        raise ConversionError(f"unknown output format {to!r} (albert_jax or hf)")
    s, o = (p if paths.is_uri(p) else os.path.realpath(p) for p in map(paths.resolve, (src, out)))
    if s == o or o.startswith(s.rstrip("/") + "/") or s.startswith(o.rstrip("/") + "/"):
        where = "is" if s == o else "is inside" if len(o) > len(s) else "contains"
        raise ConversionError(
            f"OUT {out} {where} SRC {src}: a conversion never replaces its own source; choose "
            "another OUT"
        )
    target = epath.Path(o)
    if overwrite or not target.exists():
        return
    if not target.is_dir():
        raise ConversionError(
            f"OUT {out} is a file, not a directory: not replacing it (--overwrite replaces it)"
        )
    names, ours = sorted(p.name for p in target.iterdir()), {MARKER}
    try:
        ours |= set(json.loads((target / MARKER).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no marker (or unreadable): nothing there is known to be ours
    foreign = [n for n in names if n not in ours]
    if foreign:
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ConversionError(
            f"OUT {out} exists and holds files convert did not write ({listed}); not replacing "
            "it: choose another OUT, or --overwrite to replace it"
        )

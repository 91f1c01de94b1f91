"""Checkpoint conversion: Hugging Face and Google TF1 ALBERT -> ours, ours -> Hugging Face.

`load_source(src)` detects what SRC is (our checkpoint, a transformers directory, a Google TF1
checkpoint, a pretraining workdir or one of its steps) and returns its config, parameters,
tokenizer and head; `convert(src, out, ...)` writes it as our checkpoint or as a transformers
directory, atomically, after every check has passed. Conversions are exact: a source that cannot
be represented raises ConversionError (naming the tensors or settings at fault) instead of being
approximated; no parameter is ever initialized (one documented exception: the pooler that
transformers' token classifier lacks, see `hf`).

A pretraining workdir (`python -m pretrain --workdir W`) holds train-state checkpoints
`W/checkpoints/<step>/{state,data}` and the run's config `W/config.json`; `load_workdir` reads
only the parameters of the newest readable step (or the one named by `W/checkpoints/<step>`),
on this process alone, and takes the model config and the corpus tokenizer from the run config.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from albert_jax import paths
from albert_jax.checkpoints import checkpoint, hf, legacy, tf
from albert_jax.checkpoints.checkpoint import short_error
from albert_jax.checkpoints.common import expected_shapes
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.data.pipeline import DataConfigError, corpus_tokenizer, resolve_paths
from albert_jax.model import presets, sharing
from albert_jax.model.config import AlbertConfig
from albert_jax.text import tokenization
from albert_jax.text.tokenization import TokenizerError, find_tokenizer
from albert_jax.text.wordpiece import VOCAB_FILE

__all__ = [
    "ConversionError",
    "Source",
    "convert",
    "detect",
    "is_workdir",
    "load_source",
    "load_workdir",
    "read_config",
    "read_tokenizer",
    "workdir_steps",
]

CHECKPOINTS_DIR, STATE_ITEM = "checkpoints", "state"  # the trainer's train-state layout


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


def detect(src: str) -> str:
    """'albert_jax', 'hf', 'workdir' or 'tf' for SRC, or a ConversionError saying what was
    looked for."""

    if not epath.Path(src).exists() and not epath.Path(src + ".index").exists():
        raise ConversionError(f"{src}: no such file or directory")
    is_dir = epath.Path(src).is_dir()
    if is_dir and checkpoint.is_checkpoint(src):
        return "albert_jax"
    if is_dir and not paths.is_uri(src) and hf.is_hf_dir(src):
        return "hf"
    if _split_step(src) is not None or is_workdir(src):
        return "workdir"
    if tf.is_tf_checkpoint(src):
        return "tf"
    raise ConversionError(
        f"{src}: unknown format. Expected an albert_jax checkpoint (checkpoint.json + params/), "
        "a transformers ALBERT directory (config.json with model_type 'albert' + "
        "model.safetensors or pytorch_model.bin), a pretraining workdir (config.json with a "
        "model section + checkpoints/) or one of its steps (WORKDIR/checkpoints/N), "
        "or a Google TF1 checkpoint (albert_config.json + model.ckpt-N.index/.data-*)"
    )


def load_source(src: str, config_path: str | None = None) -> Source:

    src = os.fspath(src)
    fmt = detect(src)
    if fmt == "albert_jax":
        try:
            config, params = checkpoint.load(src)
            head = checkpoint.load_head(src)
            tokenizer = checkpoint.model_tokenizer(src)
        except (checkpoint.CheckpointError, TokenizerError) as e:
            raise ConversionError(str(e)) from e
        return Source(config, params, tokenizer, fmt, src, head=head)
    if fmt == "workdir":
        split = _split_step(src)
        return load_workdir(*split) if split else load_workdir(src)
    head = None
    if fmt == "hf":
        config, params, notes, head = hf.load_hf(src)
        try:
            head = checkpoint.normalize_head(head, where=os.path.join(src, "config.json"))
        except checkpoint.CheckpointError as e:
            raise ConversionError(str(e)) from e
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
    return Source(config, params, tokenizer, fmt, location, notes, head=head)


def read_config(src: str) -> AlbertConfig:
    """The model config (shape and layout) of SRC: a preset name (`albert_jax.model.presets`), a
    config.json of ours, or anything `load_source` reads. Our checkpoints and pretraining workdirs
    keep the config apart and are read without their weights; a transformers or TF1 source is read
    whole (its group layout is worked out from the weights' names)."""

    src = os.fspath(src)
    if src in presets.NAMES:
        return presets.get(src)
    if src.endswith(".json") and epath.Path(src).is_file():
        try:
            return AlbertConfig.from_json(epath.Path(src).read_text())
        except (ValueError, TypeError) as e:
            raise ConversionError(f"{src}: not an albert_jax model config.json ({e})") from e
    fmt = detect(src)
    if fmt == "albert_jax":
        try:
            return checkpoint.load_config(src)
        except checkpoint.CheckpointError as e:
            raise ConversionError(str(e)) from e
    if fmt == "workdir" and _split_step(src) is None:
        try:
            return presets.from_run_config(_read_run_config(paths.resolve(src)))
        except (ValueError, KeyError, TypeError) as e:
            raise ConversionError(f"{src}/config.json: bad model section: {e}") from e
    return load_source(src).config


def read_tokenizer(src: str):
    """The tokenizer at SRC: a tokenizer directory (spiece.model or vocab.txt with its
    tokenizer.json: our checkpoints' `tokenizer/`, a pretraining run's `data/tokenizer`), our
    checkpoint, a pretraining workdir (its corpus tokenizer) or a transformers / Google directory.
    None when SRC holds none."""

    src = os.fspath(src)
    if not epath.Path(src).is_dir():
        raise ConversionError(f"{src}: no such directory")
    if any(epath.Path(src, f).exists() for f in (tokenization.MODEL_FILE, VOCAB_FILE)):
        return tokenization.load_tokenizer(src)
    if checkpoint.is_checkpoint(src):
        try:
            return checkpoint.model_tokenizer(src)
        except checkpoint.CheckpointError as e:
            raise ConversionError(str(e)) from e
    if is_workdir(src):
        run = _read_run_config(src)
        if "data" not in run:
            return None
        where = resolve_paths(run.data, paths.resolve(src)).tokenizer_dir
        return read_tokenizer(where) if epath.Path(where).is_dir() else None
    return tokenization.find_tokenizer(src)


# --- pretraining workdirs ------------------------------------------------------------------------
def _read_run_config(workdir: str):
    """The run's config (W/config.json) as a ConfigDict, or None if W has no run config."""
    try:
        d = json.loads(epath.Path(workdir, "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(d, dict) and isinstance(d.get("model"), dict) and "preset" in d["model"]):
        return None

    return ml_collections.ConfigDict(d)


def is_workdir(path: str) -> bool:
    """A pretraining workdir: config.json with a `model` section (preset + overrides). Its
    checkpoints/ directory may be missing or empty: load_workdir then says so."""
    return epath.Path(path).is_dir() and _read_run_config(path) is not None


def _split_step(path: str) -> tuple[str, int] | None:
    """(workdir, step) for a path W/checkpoints/<step> of a workdir W, else None."""
    path = epath.Path(paths.resolve(path))
    parent, name = path.parent, path.name
    if not (name.isdigit() and parent.name == CHECKPOINTS_DIR):
        return None
    workdir = os.fspath(parent.parent)
    return (workdir, int(name)) if is_workdir(workdir) else None


def workdir_steps(workdir: str) -> list[int]:
    """The finished train-state steps of a workdir, oldest first (orbax writes each step into
    a temporary directory and renames it to the bare step number when complete)."""
    d = epath.Path(workdir, CHECKPOINTS_DIR)
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit() and p.is_dir())


BACKBONE = ("embeddings", "encoder", "pooler")  # what an ELECTRA run's model keeps


def _restore_params(
    state_dir: str, config: AlbertConfig, keep: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """The `params` subtree of a trainer's TrainState checkpoint as host NumPy arrays (only the
    top-level entries `keep`, if given). A partial restore reads the parameters only (not the
    optimizer moments, twice their size), needs no device layout (a run on a pod converts on a
    laptop) and involves this process alone."""

    me = jax.process_index()
    solo = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    handler = ocp.PyTreeCheckpointHandler(multiprocessing_options=solo)
    try:
        stored = handler.metadata(epath.Path(state_dir)).tree
        if not (isinstance(stored, dict) and isinstance(stored.get("params"), dict)):
            raise ConversionError(f"{state_dir}: no params in this train state")
        if keep is not None:
            stored = {"params": {k: v for k, v in stored["params"].items() if k in keep}}
        # A state written up to 54ec26f may hold per-layer lists or leaves without their G = 1
        # axis: read as written, then converted (`legacy`).
        shapes = jax.tree_util.tree_map(
            lambda m: (len(m), *m[0].shape) if _is_layer_list(m) else tuple(m.shape),
            stored["params"],
            is_leaf=_is_layer_list,
        )
        want = expected_shapes(config)
        shapes = legacy.canonical_tree(shapes, want, legacy.canonical_shape)
        checkpoint.check_tree(config, shapes, f"{state_dir} (against the run's config.json)")
        as_numpy = jax.tree_util.tree_map(
            lambda _: ocp.RestoreArgs(restore_type=np.ndarray), stored["params"]
        )
        args = ocp.args.PyTreeRestore(
            item={"params": stored["params"]},
            restore_args={"params": as_numpy},
            partial_restore=True,
        )
        params = handler.restore(epath.Path(state_dir), args=args)["params"]
        return legacy.canonical_tree(params, want)
    except checkpoint.CheckpointError as e:
        raise ConversionError(str(e)) from e
    finally:
        handler.close()


def _is_layer_list(x) -> bool:
    return isinstance(x, list | tuple) and bool(x) and hasattr(x[0], "shape")


def load_workdir(workdir: str, step: int | None = None) -> Source:
    """Config, parameters and corpus tokenizer of a pretraining workdir: from `step`, or from the
    newest readable step (an unreadable one is skipped with a warning, as the trainer does)."""

    workdir = paths.resolve(workdir)
    run = _read_run_config(workdir)
    if run is None:
        raise ConversionError(f"{workdir}: not a pretraining workdir (config.json with a model)")
    try:
        config = presets.from_run_config(run)
    except (ValueError, KeyError, TypeError) as e:
        raise ConversionError(f"{workdir}/config.json: bad model section: {e}") from e
    steps = workdir_steps(workdir)
    if not steps:
        raise ConversionError(
            f"{workdir}: a pretraining workdir without checkpoints (no finished step under "
            f"{paths.join(workdir, CHECKPOINTS_DIR)}): nothing to convert yet"
        )
    notes, failures = [], []
    if step is not None and step not in steps:
        raise ConversionError(f"{workdir}: no finished checkpoint of step {step} (have {steps})")
    keep = None
    if run.get("objective", "mlm+sop") == "electra":  # the discriminator is the model
        keep = BACKBONE
        notes.append("ELECTRA run: the discriminator backbone (generator and RTD head left out)")
    for s in [step] if step is not None else reversed(steps):
        state_dir = paths.join(workdir, CHECKPOINTS_DIR, str(s), STATE_ITEM)
        try:
            params = _restore_params(state_dir, config, keep)
        except ConversionError:  # parameters that do not fit the config: the same at every step
            raise
        except Exception as e:  # noqa: BLE001 - orbax/tensorstore errors of a damaged step
            why = short_error(e)  # one line, not TensorStore's whole spec
            if step is not None:
                raise ConversionError(f"{state_dir}: cannot read the parameters ({why})") from e
            logging.warning("checkpoint step %d is unreadable (%s); trying the previous", s, why)
            failures.append(f"step {s}: {why}")
            continue
        break
    else:
        raise ConversionError(f"{workdir}: no readable checkpoint:\n  " + "\n  ".join(failures))
    if failures:
        notes += [f"skipped unreadable {f}" for f in failures]
    tokenizer = None
    try:  # the corpus tokenizer, as the run resolved it (data_dir relative to the workdir)
        data = resolve_paths(run.data, workdir)
        tokenizer = corpus_tokenizer(data, model_vocab_size=config.vocab_size)
    except (AttributeError, KeyError, OSError, TokenizerError, DataConfigError) as e:
        notes.append(f"the corpus tokenizer is not usable ({type(e).__name__}: {e}): none kept")
    location = paths.join(workdir, CHECKPOINTS_DIR, str(s))
    return Source(config, params, tokenizer, "workdir", location, notes, step=s)


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
    overwrite: bool = False,
) -> list[str]:
    """Reads SRC, optionally unshares it, writes OUT (our format or 'hf'); returns report lines.
    OUT is replaced only if it is empty or convert wrote it (`check_out`), or with `overwrite`."""

    if to not in ("albert_jax", "hf"):
        raise ConversionError(f"unknown output format {to!r} (albert_jax or hf)")
    check_out(src, out, overwrite)
    source = load_source(src, config_path)
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


def check_out(src: str, out: str, overwrite: bool = False) -> None:
    """A ConversionError unless OUT may be replaced by a conversion of SRC: never SRC itself, a
    path inside it or one that holds it (whatever `overwrite` says); an existing file or a
    directory holding anything but what convert wrote there (MARKER's list) only with
    `overwrite`: it may be the user's own files, or a pretraining workdir."""
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

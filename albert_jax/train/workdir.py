"""A pretraining run's directory read back, and the one reader of every starting point.

A pretraining workdir (`python -m pretrain --workdir W`) holds the trainer's train-state
checkpoints `W/checkpoints/<step>/{state,data}` and the run's config `W/config.json`;
`load_workdir` reads only the parameters of the newest readable step (or the one named by
`W/checkpoints/<step>`), on this process alone, and takes the model config (`model.presets`) and
the corpus tokenizer (`data.corpus`) from the run config. `workdir_steps` lists its saved steps.

`load_source(src)` reads anything a run may start from: a workdir or one of its steps here, our
checkpoints, transformers directories and Google TF1 checkpoints through
`albert_jax.checkpoints.source` (whose `FORMATS` this module's `FORMATS` extends, so the format is
detected once, in one place). `read_config` and `read_tokenizer` read only the model config or the
tokenizer of any of them (or of a preset name, a config.json, a tokenizer directory).
"""

from __future__ import annotations

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
from albert_jax.checkpoints import checkpoint, legacy, source
from albert_jax.checkpoints.checkpoint import short_error
from albert_jax.checkpoints.common import expected_shapes
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.checkpoints.source import Source
from albert_jax.data.pretraining.corpus import DataConfigError, corpus_tokenizer, resolve_paths
from albert_jax.model import presets
from albert_jax.model.config import AlbertConfig
from albert_jax.text import tokenization
from albert_jax.text.tokenization import TokenizerError
from albert_jax.text.wordpiece import VOCAB_FILE

__all__ = [
    "FORMATS",
    "ConversionError",
    "Source",
    "is_workdir",
    "load_source",
    "load_workdir",
    "read_config",
    "read_tokenizer",
    "workdir_steps",
]

CHECKPOINTS_DIR, STATE_ITEM = "checkpoints", "state"  # the trainer's train-state layout


# --- what a workdir is ---------------------------------------------------------------------------
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
    """(workdir, step) for a resolved path W/checkpoints/<step> of a workdir W, else None."""
    parent, name = epath.Path(path).parent, epath.Path(path).name
    if not (name.isdigit() and parent.name == CHECKPOINTS_DIR):
        return None
    workdir = os.fspath(parent.parent)
    return (workdir, int(name)) if is_workdir(workdir) else None


def _is_workdir_or_step(path: str) -> bool:
    return _split_step(path) is not None or is_workdir(path)


FORMATS: tuple[source.Format, ...] = (
    *source.FORMATS[:-1],  # ours, transformers
    (
        "workdir",
        _is_workdir_or_step,
        "a pretraining workdir (config.json with a model section + checkpoints/) or one of its "
        "steps (WORKDIR/checkpoints/N)",
    ),
    source.FORMATS[-1],  # Google TF1
)


# --- any starting point --------------------------------------------------------------------------
def load_source(src: str, config_path: str | None = None) -> Source:
    """Config, parameters, tokenizer and head of SRC: our checkpoint, a transformers directory, a
    Google TF1 checkpoint (`config_path`: its albert_config.json when not next to it), or a
    pretraining workdir or one of its steps. The format is detected once (`FORMATS`), then one
    reader returns the finished Source."""

    src = os.fspath(src)
    path = paths.resolve(src)  # once: the format checks and a workdir's reading take it
    fmt = source.detect(src, FORMATS, path=path)
    if fmt != "workdir":  # read from SRC as given, which their location and messages name
        return source.load_format(fmt, src, config_path)
    split = _split_step(path)  # WORKDIR/checkpoints/N, else WORKDIR itself
    return _read_workdir(*split) if split else _read_workdir(path, None)


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
    path = paths.resolve(src)
    fmt = source.detect(src, FORMATS, path=path)
    if fmt == "albert_jax":
        try:
            return checkpoint.load_config(src)
        except checkpoint.CheckpointError as e:
            raise ConversionError(str(e)) from e
    if fmt == "workdir":
        split = _split_step(path)
        if split:
            return _read_workdir(*split).config
        try:
            return presets.from_run_config(_read_run_config(path))
        except (ValueError, KeyError, TypeError) as e:
            raise ConversionError(f"{src}/config.json: bad model section: {e}") from e
    return source.load_format(fmt, src).config


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


# --- a workdir's steps and parameters ------------------------------------------------------------
def workdir_steps(workdir: str) -> list[int]:
    """The finished train-state steps of a workdir, oldest first (orbax writes each step into
    a temporary directory and renames it to the bare step number when complete)."""
    d = epath.Path(workdir, CHECKPOINTS_DIR)
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit() and p.is_dir())


BACKBONE = ("embeddings", "encoder", "pooler")  # what an ELECTRA run's model keeps


def load_workdir(workdir: str, step: int | None = None) -> Source:
    """Config, parameters and corpus tokenizer of a pretraining workdir: from `step`, or from the
    newest readable step (an unreadable one is skipped with a warning, as the trainer does)."""
    return _read_workdir(paths.resolve(workdir), step)


def _read_workdir(workdir: str, step: int | None) -> Source:
    """`load_workdir` of a resolved WORKDIR."""
    run, steps = _read_run_config(workdir), workdir_steps(workdir)
    if run is None:
        raise ConversionError(f"{workdir}: not a pretraining workdir (config.json with a model)")
    try:
        config = presets.from_run_config(run)
    except (ValueError, KeyError, TypeError) as e:
        raise ConversionError(f"{workdir}/config.json: bad model section: {e}") from e
    if not steps:
        raise ConversionError(
            f"{workdir}: a pretraining workdir without checkpoints (no finished step under "
            f"{paths.join(workdir, CHECKPOINTS_DIR)}): nothing to convert yet"
        )
    notes, failures = [], []
    if step is not None and step not in steps:
        raise ConversionError(f"{workdir}: no finished checkpoint of step {step} (have {steps})")
    keep = None
    if "objective" in run and run.objective == "electra":  # the discriminator is the model
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

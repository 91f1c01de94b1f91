"""Our checkpoint format: one directory with the parameters, the model config and the tokenizer.

    PATH/
      config.json       AlbertConfig.to_json() (AlbertConfig.from_json reads it back)
      checkpoint.json   {"format": "albert_jax", "version": 1, "tokenizer": "sentencepiece" |
                        "wordpiece" | null, "head": {...} | null, "info": {...}}
                        (info: where the weights came from)
      params/           orbax StandardCheckpointer directory with the parameter tree
      tokenizer/        optional: spiece.model or vocab.txt, plus tokenizer.json settings
      provenance.json   what wrote it: commit, package versions, devices, command
                        (`albert_jax.provenance`; not read back)

`head` is the fine-tuning head dict of `albert_jax.model.heads` (`{"type":
"sequence_classification", "num_labels": 3, ...}`, stored as JSON), or null for a pretraining /
backbone checkpoint; files written before heads existed have no `head` key and read as null. The
parameter tree is exactly `heads.param_shapes(config, head)`: with null, the backbone plus
optionally the pretraining heads
`mlm` and `sop`; with a classification head, the backbone plus `classifier` and nothing else (a
fine-tuned model has no use for `mlm`/`sop`, and no export format has a place for them).

Saves are atomic: everything is written into a temporary directory next to PATH, which then
takes PATH's place in one rename (an atomic exchange when PATH already exists), so a crash leaves
either the previous checkpoint or the new one, never a mix. PATH may be a bucket URI (gs://...):
there the new copy is complete beside PATH before the old one is replaced (`_write_to_bucket`).
`load` checks every parameter's path and shape against the config and head before restoring any
data. Save and load involve only the calling process, so process 0 of a multi-process job can
write or read a checkpoint alone.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from etils import epath

from albert_jax import paths, provenance
from albert_jax.checkpoints import legacy
from albert_jax.checkpoints.common import expected_shapes, flatten
from albert_jax.errors import InputError
from albert_jax.model.config import AlbertConfig
from albert_jax.model.heads import MODELS
from albert_jax.text import tokenization

FORMAT, VERSION = "albert_jax", 1
CONFIG_FILE, META_FILE, PARAMS_DIR, TOKENIZER_DIR = (
    "config.json",
    "checkpoint.json",
    "params",
    "tokenizer",
)
OPTIONAL_HEADS = ("mlm", "sop")  # a backbone-only checkpoint may lack them


class CheckpointError(InputError):
    """A directory that is not a complete, consistent albert_jax checkpoint."""


def short_error(e: BaseException, limit: int = 300) -> str:
    """One line for an orbax / TensorStore error, whose text carries the whole JSON spec of
    the array (~60 lines): the exception's type and its first line, the spec cut out."""
    text = re.sub(r"\{.*\}", "{...}", str(e), flags=re.DOTALL)  # the spec dicts
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {first[:limit]}"


# --- atomic directory writes ---
def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, a.encode(), at_fdcwd, b.encode(), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(ctypes.get_errno(), f"renameat2({a!r}, {b!r}) failed")


def write_atomically(path: str | os.PathLike, write: Callable[[str], Any]) -> Any:
    """Calls `write(tmp_dir)` on a fresh directory next to `path`, then puts it at `path`.
    On any error the temporary directory is removed and `path` is untouched."""
    path = paths.resolve(path)
    if paths.is_uri(path):
        return _write_to_bucket(path, write)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    # Not mkdtemp, whose 0700 the output would keep: mkdir gives what the umask allows.
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex[:8]}")
    os.mkdir(tmp)
    try:
        result = write(tmp)
        if not os.path.exists(path):
            os.rename(tmp, path)
        elif os.path.isdir(path) and _exchange(tmp, path):
            shutil.rmtree(tmp)  # now the old checkpoint
        else:  # no atomic exchange: the old one is moved aside for the moment of the swap
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rename(path, os.path.join(old, "previous"))
            os.rename(tmp, path)
            shutil.rmtree(old)
        return result
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_to_bucket(path: str, write: Callable[[str], Any]) -> Any:
    """An object store renames nothing atomically, so the checkpoint is written whole beside
    `path` first; only then is the old one removed and the new one moved in. A crash in between
    leaves the complete new copy in `PATH.tmp-*`; `checkpoint.json`, written last, marks a copy
    complete (`is_checkpoint`)."""
    target = epath.Path(path)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        result = write(os.fspath(tmp))
    except BaseException:
        if tmp.exists():
            tmp.rmtree()
        raise
    if target.exists():
        target.rmtree()
    tmp.rename(target)
    return result


def _this_process_only():
    """orbax options that make a checkpointer work on this process alone: no barriers with the
    other processes of a multi-process job (which are not saving or loading this checkpoint)."""
    import jax
    import orbax.checkpoint as ocp

    me = jax.process_index()
    return ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})


# --- heads ---
def normalize_head(head: Any, where: str = "head") -> dict[str, Any] | None:
    """The head dict as stored: None for no head or a pretraining head, else a JSON copy (tuples
    become lists) whose type, num_labels and labels `heads.build_model` accepts."""
    if head is None:
        return None
    if not isinstance(head, dict):
        raise CheckpointError(f"{where}: a head is a dict, got {type(head).__name__}")
    if head.get("type") == "pretraining":
        return None
    try:
        head = json.loads(json.dumps(head))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: the head dict is not JSON-serializable: {e}") from e
    kind, n = head.get("type"), head.get("num_labels")
    if kind not in MODELS:
        raise CheckpointError(f"{where}: unknown head type {kind!r} (one of {list(MODELS)})")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise CheckpointError(f"{where}: head {kind!r} needs num_labels >= 1, got {n!r}")
    labels = head.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != n):
        raise CheckpointError(f"{where}: head labels {labels!r} are not a list of {n} names")
    return head


# --- save / load ---
def save(
    path: str | os.PathLike,
    config: AlbertConfig,
    params: dict[str, Any],
    tokenizer=None,
    info: dict[str, Any] | None = None,
    head: dict[str, Any] | None = None,
) -> None:
    """Writes (config, params[, tokenizer]) as an albert_jax checkpoint at `path`, atomically.
    `head`: the fine-tuning head the params belong to (see the module docstring); None for a
    pretraining or backbone-only checkpoint."""
    head = check(path, config, params, tokenizer, head)
    write_atomically(path, lambda tmp: write(tmp, config, params, tokenizer, info, head))


def check(path, config: AlbertConfig, params: dict[str, Any], tokenizer=None, head=None):
    """What `save` checks before writing anything at `path`; returns the head as stored."""
    head = normalize_head(head, where=f"head for {path}")
    check_tree(config, _shape_tree(params), f"params for {path}", head)
    if tokenizer is not None and tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"tokenizer has {tokenizer.vocab_size} entries, config vocab_size is "
            f"{config.vocab_size}"
        )
    return head


def write(
    directory: str,
    config: AlbertConfig,
    params: dict[str, Any],
    tokenizer=None,
    info: dict[str, Any] | None = None,
    head: dict[str, Any] | None = None,
) -> None:
    """`save`'s files, written into an existing empty `directory`, unchecked (`check` first),
    for a caller that makes the write atomic itself with files of its own beside them
    (`source.convert`)."""
    import jax
    import orbax.checkpoint as ocp

    host = jax.tree_util.tree_map(np.asarray, params)
    with ocp.StandardCheckpointer(multiprocessing_options=_this_process_only()) as ckptr:
        ckptr.save(paths.join(directory, PARAMS_DIR), host)
        ckptr.wait_until_finished()
    epath.Path(directory, CONFIG_FILE).write_text(config.to_json() + "\n")
    kind = None
    if tokenizer is not None:
        tokenization.save_tokenizer(tokenizer, paths.join(directory, TOKENIZER_DIR))
        kind = "wordpiece" if hasattr(tokenizer, "pieces") else "sentencepiece"
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "tokenizer": kind,
        "head": head,
        "info": info or {},
    }
    epath.Path(directory, META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    record = json.dumps(provenance.collect(), indent=2, sort_keys=True)  # what made this model
    epath.Path(directory, provenance.FILE).write_text(record + "\n")


def is_checkpoint(path: str | os.PathLike) -> bool:
    path = epath.Path(path)
    return (path / META_FILE).is_file() and (path / PARAMS_DIR).is_dir()


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    try:
        meta = json.loads(epath.Path(path, META_FILE).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not an albert_jax checkpoint ({META_FILE}: {e})") from e
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: unsupported checkpoint format {meta}")
    return meta


def load_config(path: str | os.PathLike) -> AlbertConfig:
    try:
        return AlbertConfig.from_json(epath.Path(path, CONFIG_FILE).read_text())
    except (OSError, ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: bad {CONFIG_FILE}: {e}") from e


def load_head(path: str | os.PathLike) -> dict[str, Any] | None:
    """The checkpoint's head dict, or None (pretraining / backbone, or written before heads)."""
    return normalize_head(read_meta(path).get("head"), where=f"{path}: {META_FILE}")


def load(path: str | os.PathLike) -> tuple[AlbertConfig, dict[str, Any]]:
    """(config, params) of an albert_jax checkpoint; params are host NumPy arrays. The head they
    belong to is `load_head(path)`."""
    import jax
    import orbax.checkpoint as ocp

    path = paths.resolve(path)
    head = load_head(path)
    config = load_config(path)
    params_dir = paths.join(path, PARAMS_DIR)
    try:
        with ocp.StandardCheckpointer(multiprocessing_options=_this_process_only()) as ckptr:
            meta = ckptr.metadata(params_dir)
            if meta is None or meta.item_metadata is None:  # orbax logs a warning, returns None
                raise CheckpointError(
                    f"{path}: cannot restore parameters ({PARAMS_DIR}/_METADATA is missing or "
                    "unreadable)"
                )
            stored = meta.item_metadata.tree
            want = expected_shapes(config, head)  # before 54ec26f a G = 1 leaf had no G axis
            shapes = jax.tree_util.tree_map(lambda m: tuple(m.shape), stored)
            shapes = legacy.canonical_tree(shapes, want, legacy.canonical_shape)
            check_tree(config, shapes, path, head)
            device = jax.sharding.SingleDeviceSharding(jax.local_devices(backend="cpu")[0])
            target = jax.tree_util.tree_map(
                lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), stored
            )
            params = ckptr.restore(params_dir, target)
    except CheckpointError:
        raise
    except Exception as e:  # orbax/tensorstore errors on missing or damaged files
        raise CheckpointError(f"{path}: cannot restore parameters ({short_error(e)})") from e
    return config, legacy.canonical_tree(jax.tree_util.tree_map(np.asarray, params), want)


def model_tokenizer(path: str | os.PathLike):
    """The checkpoint's tokenizer, or None if it was saved without one."""
    if read_meta(path).get("tokenizer") is None:
        return None
    return tokenization.load_tokenizer(paths.join(path, TOKENIZER_DIR))


# --- checks ---
def _shape_tree(params: dict[str, Any]) -> dict[str, Any]:
    import jax

    return jax.tree_util.tree_map(lambda x: tuple(np.shape(x)), params)


def check_tree(
    config: AlbertConfig, shapes: dict[str, Any], where: str, head: dict[str, Any] | None = None
) -> None:
    """Every parameter the config and head imply is present with its shape; nothing else is.
    `shapes`: a nested dict of shape tuples. Without a head, `mlm` and `sop` may be absent."""
    got = flatten(shapes) if isinstance(shapes, dict) else {}
    want = expected_shapes(config, head)
    if head is None:
        absent = {h for h in OPTIONAL_HEADS if not any(k.startswith(h + "/") for k in got)}
        want = {k: v for k, v in want.items() if k.split("/")[0] not in absent}
    missing = sorted(set(want) - set(got))
    unexpected = sorted(set(got) - set(want))
    misshaped = sorted(
        f"{k}: {got[k]}, expected {want[k]}" for k in set(want) & set(got) if got[k] != want[k]
    )
    problems = [
        f"{label}: {items}"
        for label, items in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("shape disagrees with config.json", misshaped),
        )
        if items
    ]
    if problems:
        model = f"config and the {head['type']} head" if head else "config"
        raise CheckpointError(
            f"{where}: parameters do not match the {model}; " + "; ".join(problems)
        )

"""Local paths and bucket URIs (gs://, s3://, ... through `etils.epath`) taken alike.

Every path a run is given (workdir, data_dir, tokenizer, checkpoints, corpus files) goes through
`resolve`: a local path becomes absolute, a URI stays as it is (`os.path.abspath` would turn
`gs://b/run` into `./gs:/b/run`). Our own files are then read and written through `epath.Path`,
so the same code serves a disk and a bucket; orbax (TensorStore), TFDS and ArrayRecord take the
URI themselves. The few writers that need a local file (SentencePiece training, the Python log
handler, TensorBoard) use a local directory for a URI (`local_mirror`) and copy out.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile

from etils import epath

# The shipped configs (albert_jax.configs: in a checkout `configs/` links here; in a wheel they
# are the only copy).
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")
CONFIG_KINDS = ("pretrain", "finetune", "sweeps")


def config_file(spec: str) -> str:
    """A `--config` value (`FILE` or `FILE:ARG`) with FILE found: as given when it exists (one's
    own file, or `configs/...` from a checkout), else among the shipped configs, so that an
    installed wheel runs them by name from any directory: `configs/finetune/glue.py`,
    `finetune/glue.py`, `glue.py` or `glue` (each name is in one of pretrain/, finetune/,
    sweeps/). Not found: `spec` unchanged, for the caller's error to name what was typed."""
    path, sep, arg = spec.partition(":")
    if not path or os.path.exists(path) or is_uri(path):
        return spec
    rel = os.path.normpath(path)
    rel = rel.removeprefix("configs" + os.sep)
    rel = rel if rel.endswith(".py") else rel + ".py"
    found = [os.path.join(CONFIGS, rel)]
    if os.sep not in rel:
        found += [os.path.join(CONFIGS, kind, rel) for kind in CONFIG_KINDS]
    found = [f for f in found if os.path.isfile(f)]
    return found[0] + sep + arg if len(found) == 1 else spec


def is_uri(path: str | os.PathLike) -> bool:
    return "://" in os.fspath(path)


def resolve(path: str | os.PathLike, base: str | os.PathLike | None = None) -> str:
    """`path` made absolute: relative to `base` (itself resolved) or the current directory;
    `~` expanded; a URI (or a relative path under a URI `base`) kept as a URI."""
    path = os.fspath(path)
    if is_uri(path):
        return path.rstrip("/")
    path = os.path.expanduser(path)
    if base is not None and not os.path.isabs(path):
        return join(resolve(base), path)
    return os.path.abspath(path)


def join(base: str | os.PathLike, *parts: str) -> str:
    return os.fspath(epath.Path(base).joinpath(*parts))


def open_text(path: str | os.PathLike, mode: str = "r", newline: str | None = None):
    """A UTF-8 text file, local or in a bucket (epath alone would use the locale's encoding)."""
    if not is_uri(path):
        return open(path, mode, encoding="utf-8", newline=newline)
    return io.TextIOWrapper(epath.Path(path).open(mode + "b"), encoding="utf-8", newline=newline)


def write_text(path: str | os.PathLike, text: str) -> None:
    """`write_bytes` of the UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes through a temporary sibling and a rename, so a reader never sees half a file and a
    crash leaves the old file or the new one, whole (on an object store the rename is a copy,
    still whole-file)."""
    path = epath.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise


def local_mirror(path: str | os.PathLike) -> str:
    """A local directory standing in for `path` where a writer cannot write to a URI: `path`
    itself when local, else a directory under the temporary directory named after the URI."""
    path = os.fspath(path)
    if not is_uri(path):
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    name = path.split("://", 1)[1].strip("/").replace("/", "_")[-60:]
    return os.path.join(tempfile.gettempdir(), "albert_jax_mirror", f"{name}-{digest}")


def is_file(path: str | os.PathLike) -> bool:
    path = epath.Path(path)  # (pathlib's is_file stats through a local-only route)
    return path.exists() and not path.is_dir()


def files_under(top: str | os.PathLike, skip_hidden: bool = False) -> list[str]:
    """Every file under directory `top`, sorted; with `skip_hidden` no names starting with '.'
    and nothing under such directories."""
    found = []
    for root, dirs, names in epath.Path(top).walk():
        if skip_hidden:
            dirs[:] = [n for n in dirs if not n.startswith(".")]  # walk descends these
            names = [n for n in names if not n.startswith(".")]
        found += [os.fspath(root / n) for n in names]
    return sorted(found)


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Copies the files under `src` to the same relative places under `dst`, replacing them."""
    src = os.fspath(src)
    for f in files_under(src):
        out = epath.Path(dst, os.path.relpath(f, src))
        out.parent.mkdir(parents=True, exist_ok=True)
        epath.Path(f).copy(out, overwrite=True)

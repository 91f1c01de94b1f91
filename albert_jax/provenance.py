"""What made a run or a model: the code (git commit, and whether the tree had uncommitted changes,
when run from a checkout; the installed package's version otherwise), the versions of the
packages that decide its numbers, the devices, the process count and the exact command.

The trainer appends one record per start to `WORKDIR/provenance.jsonl` (a resumed run adds its
own: the code or the machines may have changed between starts), with the mesh; every model
directory a checkpoint save writes carries `provenance.json` (`albert_jax.checkpoints`).
Nothing here fails a run: a field that cannot be read is None.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys

# The packages whose versions change a run's numbers or its speed; an absent one is left out
# (libtpu on a GPU host, the CUDA plugin on a TPU VM).
PACKAGES = (
    "albert-jax", "jax", "jaxlib", "libtpu", "libtpu-nightly", "jax-cuda12-plugin",
    "jax-cuda12-pjrt", "flax", "optax", "orbax-checkpoint", "grain", "numpy",
    "sentencepiece", "tensorflow-datasets",
)  # fmt: skip

FILE = "provenance.json"  # in a model directory
RUN_FILE = "provenance.jsonl"  # in a workdir: one record per start


def versions() -> dict[str, str]:
    """{distribution: version} of the installed `PACKAGES`, and Python's."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def source_tree(where: str | None = None) -> dict[str, object]:
    """The git commit of the checkout holding the `albert_jax` package (or `where`), and
    whether tracked files differ from it; {"commit": None} when not a checkout (a wheel)."""
    root = where or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        return {"commit": None, "dirty": None}

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ("git", "-C", root, *args), capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def devices() -> dict[str, object]:
    """The backend and devices JAX sees (jax is imported only here, so the rest stays light)."""
    try:
        import jax

        devs = jax.devices()
        return {
            "backend": jax.default_backend(),
            "device_kind": devs[0].device_kind,
            "device_count": len(devs),
            "local_device_count": jax.local_device_count(),
            "process_count": jax.process_count(),
            "process_index": jax.process_index(),
        }
    except Exception as e:  # never fail the run for a record of it
        return {"backend": None, "error": f"{type(e).__name__}: {e}"}


def collect(mesh=None) -> dict[str, object]:
    """The record: time, code, versions, host, devices (and `mesh`'s axes), command."""
    record = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        **source_tree(),
        "versions": versions(),
        "host": socket.gethostname(),
        **devices(),
        "command": list(getattr(sys, "orig_argv", sys.argv)),  # as typed: `python -m pretrain ...`
        "executable": sys.executable,
        "cwd": os.getcwd(),
    }
    if mesh is not None:
        record["mesh"] = {str(k): int(v) for k, v in dict(mesh.shape).items()}
    return record

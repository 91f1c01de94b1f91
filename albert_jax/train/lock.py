"""One run per workdir: `WORKDIR/.lock` says which process holds it.

Two runs writing one workdir mix their checkpoints, `best/` model and metrics without an error
(run A's final figures would come from run B's best model), so the second one is refused. The
lock is a file holding the holder's host, pid, process start time and command, written whole
under a temporary name and then linked into place (a racer never reads it half-written; exactly
one link succeeds). A lock whose process is gone from this host (killed, crashed) is stale and
taken over with a note, under an flock of the workdir so that racers take it over one at a time
(the first replaces it, the others find the new holder alive); a lock from another host is never
guessed about: the message says how to remove it.
Reentrant within a process (fine-tuning holds the workdir, then the trainer holds it again).
A bucket workdir (gs://...) has no atomic create: it is not locked (a log line says so).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import time

from albert_jax import paths
from albert_jax.errors import InputError

LOCK_NAME = ".lock"
_held: dict[str, int] = {}  # lock path -> nesting depth in this process


class WorkdirBusyError(InputError):
    """The workdir is held by another live run."""


def _start_time(pid: int) -> str | None:
    """The process' start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(holder: dict) -> bool:
    pid = int(holder.get("pid", -1))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    started = holder.get("start_time")
    return started is None or _start_time(pid) in (None, started)


def _me() -> dict:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start_time": _start_time(os.getpid()),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(sys.argv),
    }


def acquire(workdir: str, name: str = LOCK_NAME) -> bool:
    """Hold `workdir` for this process (True), or raise WorkdirBusyError naming the holder.
    False for a bucket workdir, which is not locked. `name`: the lock file (a sweep locks
    each group of its workdir apart)."""
    if paths.is_uri(workdir):
        logging.info("%s is a bucket path: not locked against a second run", workdir)
        return False
    path = os.path.join(os.path.abspath(workdir), name)
    if path in _held:
        _held[path] += 1
        return True
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not _create(path):
        with _guard(os.path.dirname(path)):  # one racer at a time reads and replaces it
            if not _create(path):
                _take_over_if_stale(path)
                if not _create(path):
                    raise WorkdirBusyError(f"could not lock {path}: another run keeps taking it")
    _held[path] = 1
    return True


def _create(path: str) -> bool:
    """Create the lock file whole (written under a temporary name, then linked: the link fails
    if the lock exists); False if it exists."""
    tmp = f"{path}.{socket.gethostname()}.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(_me(), f)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as e:  # e.g. a read-only workdir: name the lock, not the temporary file
        if e.filename != tmp:
            raise
        raise OSError(e.errno, e.strerror, path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


@contextlib.contextmanager
def _guard(workdir: str):
    """An exclusive flock of the workdir itself (the kernel drops it when its holder dies)."""
    fd = os.open(workdir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _take_over_if_stale(path: str) -> None:
    try:
        with open(path) as f:
            holder = json.load(f)
    except FileNotFoundError:  # released meanwhile
        return
    except (OSError, ValueError):  # not ours (locks are written whole): e.g. an empty file
        holder = {}
    workdir = os.path.dirname(path)
    same_host = holder.get("host") == socket.gethostname()
    if holder and not same_host:
        raise WorkdirBusyError(
            f"{workdir} is in use by pid {holder.get('pid')} on host {holder.get('host')} since "
            f"{holder.get('since')} ({holder.get('command')!r}); if that run is gone, delete {path}"
        )
    if holder and _alive(holder):
        raise WorkdirBusyError(
            f"{workdir} is in use by pid {holder['pid']} since {holder.get('since')} "
            f"({holder.get('command')!r}): wait for it to finish, or use another --workdir"
        )
    who = f"pid {holder['pid']}, no longer running" if holder else "unreadable"
    print(f"note: taking over the stale lock on {workdir} ({who})", flush=True)
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def release(workdir: str, name: str = LOCK_NAME) -> None:
    """Undo one `acquire` (the file goes when the outermost one is undone)."""
    if paths.is_uri(workdir):
        return
    path = os.path.join(os.path.abspath(workdir), name)
    if path not in _held:
        return
    _held[path] -= 1
    if _held[path] == 0:
        del _held[path]
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def acquire_waiting(workdir: str, name: str = LOCK_NAME, poll_s: float = 2.0) -> bool:
    """`acquire`, waiting while another run holds the lock (with one note as the wait begins)."""
    waiting = False
    while True:
        try:
            return acquire(workdir, name)
        except WorkdirBusyError as e:
            if not waiting:
                print(f"note: waiting: {e}", flush=True)
                waiting = True
            time.sleep(poll_s)


class hold:
    """`with hold(workdir):` acquire ... release (on process 0 only: one holder per run).
    `wait`: wait for a busy lock instead of refusing (`acquire_waiting`)."""

    def __init__(self, workdir: str, enabled: bool = True, name: str = LOCK_NAME, wait=False):
        self.workdir, self.enabled, self.name, self.wait = workdir, enabled, name, wait

    def __enter__(self):
        if self.enabled:
            (acquire_waiting if self.wait else acquire)(self.workdir, self.name)
        return self

    def __exit__(self, *exc):
        if self.enabled:
            release(self.workdir, self.name)
        return False


@atexit.register
def _release_all() -> None:  # an exit that skipped the `with` (sys.exit inside absl)
    for path in list(_held):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    _held.clear()

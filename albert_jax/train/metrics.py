"""Metrics: the writer fanning rows out to the trackers (`albert_jax.train.trackers`: JSONL,
TensorBoard without TensorFlow, Weights & Biases), console progress, the run's log file. The
model FLOPs behind MFU are counted in `albert_jax.model.flops`."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time

from etils import epath
from tqdm import tqdm

from albert_jax import paths
from albert_jax.train import trackers as trackers_lib
from albert_jax.train.trackers import read_rows  # noqa: F401  (the public reader, here too)

log = logging.getLogger(__name__)


class UploadError(OSError):
    """A file of a bucket run that could not be copied into the bucket."""


class MetricWriter:
    """Scalars to the trackers `trackers` (`TrainerConfig.trackers`; metrics.jsonl and
    TensorBoard by default), process 0 only; a run resumed at `resume_step` drops the rows a
    killed run wrote past its checkpoint (`trackers.JsonlTracker`).

    A local workdir is written in place as rows come. A bucket workdir is brought up to date at
    each `sync`: every checkpoint (the trainer calls it), the first `write` `sync_every_s`
    seconds after the last sync, and `close`. A sync reads the new rows, the changed TensorBoard
    event files and `train.log` (both written in `paths.local_mirror`) in the calling thread and
    sends them from one background thread, so a step never waits on the bucket; a kill loses
    what came after the last sync. `close` waits for the uploads and raises an `UploadError`
    naming a file it could not copy. `trackers.read_rows` reads a running bucket run's rows."""

    def __init__(
        self,
        workdir: str,
        enabled: bool = True,
        resume_step: int = 0,
        trackers=trackers_lib.DEFAULT,
        sync_every_s: float = 120.0,
        wandb_project: str = "",
    ):
        self.enabled, self.workdir = enabled, workdir
        self.sync_every_s = float(sync_every_s)
        self._remote = paths.is_uri(workdir)
        self._futures: list[concurrent.futures.Future] = []
        if not enabled:
            return
        if not self._remote:
            os.makedirs(workdir, exist_ok=True)
        self.trackers = trackers_lib.start(
            trackers, workdir, resume_step=resume_step, wandb_project=wandb_project
        )
        # train.log (`log_to_file`) is written locally for a bucket workdir: sent at each sync
        self._log = trackers_lib.LocalFiles(paths.local_mirror(workdir), workdir)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="metrics-upload")
        self._last_sync = time.monotonic()

    def write(self, step: int, scalars: dict[str, float], prefix: str = "train") -> None:
        if not self.enabled:
            return
        for t in self.trackers:
            t.write(step, scalars, prefix)
        if time.monotonic() - self._last_sync >= self.sync_every_s:
            self.sync()

    def sync(self) -> None:
        """Brings a bucket workdir up to date (in the background); a local one is flushed."""
        if not self.enabled:
            return
        self._last_sync = time.monotonic()
        uploads = [u for t in self.trackers for u in t.sync()]
        if self._remote:
            uploads += self._log.changed(["train.log"])
        if uploads:
            self._futures = [f for f in self._futures if not f.done() or _warn(f)]
            self._futures.append(self._pool.submit(_send, uploads))

    def wait(self) -> list[tuple[str, BaseException]]:
        """Waits for the uploads so far; returns the (path, error) of those that failed."""
        failed = [x for f in self._futures for x in f.result()]
        self._futures = []
        return failed

    def close(self) -> None:
        if not self.enabled:
            return
        try:
            self.wait()  # a file that failed to go is sent again by the last sync, and
            self.sync()  # the rows of a failed part go into metrics.jsonl at the trackers' close
            failed = [(dst, e) for dst, e in self.wait() if trackers_lib.PARTS not in dst]
        finally:
            self._pool.shutdown(wait=True)
            for t in self.trackers:
                t.close()  # (a bucket's metrics.jsonl is written here, after the parts)
        if failed:
            dst, error = failed[0]
            raise UploadError(f"could not copy {dst} into the bucket: {error}") from error


def _send(uploads: list[trackers_lib.Upload]) -> list[tuple[str, BaseException]]:
    """Writes each upload (in the background thread); returns the failures, each file to be
    sent again at the next sync."""
    failed = []
    for u in uploads:
        try:
            _put(u.dst, u.data)
        except Exception as e:  # a full disk, a bucket refusing: the run goes on
            failed.append((u.dst, e))
            if u.failed is not None:
                u.failed()
    return failed


def _put(dst: str, data: bytes) -> None:
    """One object written whole (an object store shows the old or the new one, never a part);
    not through a temporary sibling, which TensorBoard would take for one more event file."""
    path = epath.Path(dst)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _warn(future: concurrent.futures.Future) -> bool:
    """Logs the failures of a finished upload (sent again at the next sync); False."""
    for dst, error in future.result():
        log.warning("could not copy %s into the bucket (tried again later): %s", dst, error)
    return False


def _console_filter(record: logging.LogRecord) -> bool:
    """Console: our own warnings and everyone's errors; library chatter (absl-logged: orbax,
    TFDS, grain) only in the log file."""
    return record.levelno >= logging.ERROR or (
        record.levelno >= logging.WARNING and record.name != "absl"
    )


def log_to_file(workdir: str) -> str:
    """All INFO logging goes to `workdir/train.log` (for a bucket workdir, to a local file that
    `MetricWriter.sync` copies there); the console keeps the progress bar, one line per
    evaluation, our warnings and errors. Idempotent; returns the log file's local path."""
    path = os.path.abspath(os.path.join(paths.local_mirror(workdir), "train.log"))
    root = logging.getLogger()
    if any(getattr(h, "baseFilename", None) == path for h in root.handlers):
        return path
    for h in root.handlers:
        if _console_filter not in h.filters:
            h.addFilter(_console_filter)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path


DEFAULT_PROGRESS_KEYS = ("loss", "mlm_accuracy", "sop_accuracy", "learning_rate")


class Progress:
    """A console progress bar with ETA and the latest metrics (process 0 only)."""

    def __init__(self, start: int, total: int, enabled: bool = True, bar: bool = True, keys=None):
        self.keys = tuple(keys or DEFAULT_PROGRESS_KEYS)
        self.bar = tqdm(
            total=total,
            initial=start,
            unit="step",
            dynamic_ncols=True,
            disable=not (enabled and bar),
            mininterval=1.0,
        )
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def update(self, step: int, scalars: dict[str, float] | None = None) -> None:
        self.bar.update(step - self.bar.n)
        if scalars:
            self.bar.set_postfix(
                {k: f"{scalars[k]:.4g}" for k in self.keys if k in scalars}, refresh=False
            )

    def write(self, line: str) -> None:
        """A line above the bar (the bar is redrawn below it)."""
        if not self.bar.disable:
            self.bar.write(line)
        elif self.enabled:
            print(line, flush=True)

    def close(self) -> None:
        self.bar.close()

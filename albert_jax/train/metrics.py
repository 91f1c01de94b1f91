"""Metrics: JSONL + TensorBoard writers (no TensorFlow), console progress, the run's log file.
The model FLOPs behind MFU are counted in `albert_jax.model.flops`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time

from etils import epath
from tensorboardX import SummaryWriter
from tqdm import tqdm

from albert_jax import paths


class MetricWriter:
    """Scalars to `metrics.jsonl` and TensorBoard event files in the workdir (process 0 only).
    For a bucket workdir the event files are written locally (`paths.local_mirror`) and copied
    into it, with `train.log`, at `close`; `metrics.jsonl` is rewritten whole at each write (an
    object store has no append).

    A run resumed at `resume_step` first drops the rows a killed run wrote past its checkpoint
    (and that step's evaluation, which the trainer repeats), so each row is written once."""

    def __init__(self, workdir: str, enabled: bool = True, resume_step: int = 0):
        self.enabled, self.workdir = enabled, workdir
        if enabled:
            self._jsonl_path = epath.Path(workdir) / "metrics.jsonl"
            self._remote = paths.is_uri(workdir)
            rows = self._jsonl_path.read_text() if self._jsonl_path.exists() else ""
            rows = "".join(r for r in rows.splitlines(True) if _kept(r, resume_step))
            if self._remote:
                self._rows = rows
            else:
                os.makedirs(workdir, exist_ok=True)
                paths.write_text(self._jsonl_path, rows)
                self._jsonl = open(self._jsonl_path, "a", buffering=1)
            events = os.path.join(paths.local_mirror(workdir), "tensorboard")
            if self._remote and os.path.isdir(events):  # a killed run's events, not copied yet
                paths.copy_tree(events, paths.join(workdir, "tensorboard"))
                shutil.rmtree(events)
            self._tb = SummaryWriter(events)

    def write(self, step: int, scalars: dict[str, float], prefix: str = "train") -> None:
        if not self.enabled:
            return
        row = {"step": int(step), "split": prefix, **{k: float(v) for k, v in scalars.items()}}
        if self._remote:
            self._rows += json.dumps(row) + "\n"
            self._jsonl_path.write_text(self._rows)
        else:
            self._jsonl.write(json.dumps(row) + "\n")
        for k, v in scalars.items():
            self._tb.add_scalar(f"{prefix}/{k}", float(v), int(step))
        self._tb.flush()

    def close(self) -> None:
        if self.enabled:
            if not self._remote:
                self._jsonl.close()
            self._tb.close()
            if self._remote:  # the events, and train.log as far as it goes
                paths.copy_tree(paths.local_mirror(self.workdir), self.workdir)


def _kept(line: str, resume_step: int) -> bool:
    """A metrics.jsonl row written before `resume_step` (or its training and goodput rows); a
    line cut by a kill is dropped."""
    try:
        row = json.loads(line)
    except ValueError:
        return False
    at = row["step"] == resume_step and row["split"] in ("train", "goodput")
    return row["step"] < resume_step or at


def _console_filter(record: logging.LogRecord) -> bool:
    """Console: our own warnings and everyone's errors; library chatter (absl-logged: orbax,
    TFDS, grain) only in the log file."""
    return record.levelno >= logging.ERROR or (
        record.levelno >= logging.WARNING and record.name != "absl"
    )


def log_to_file(workdir: str) -> str:
    """All INFO logging goes to `workdir/train.log` (for a bucket workdir, to a local file that
    `MetricWriter.close` copies there); the console keeps the progress bar, one line per
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

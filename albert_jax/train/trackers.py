"""Where the trainer's scalars go: the trackers named in `TrainerConfig.trackers`.

    jsonl        WORKDIR/metrics.jsonl, one JSON row per (step, split); always on (resume, the
                 run summaries and the sweep reports read it)
    tensorboard  TensorBoard event files in WORKDIR/tensorboard (tensorboardX, no TensorFlow)
    wandb        Weights & Biases (the `wandb` extra); one wandb run per workdir

`albert_jax.train.metrics.MetricWriter` fans each row out to them (process 0 only) and owns the
copying into a bucket workdir. A tracker is `write(step, scalars, prefix)`, `sync()` and
`close()`; `sync` returns the `Upload`s a bucket workdir needs (bytes read in the calling thread,
so a file being written is never copied half-way), which the writer sends in the background.

A bucket has no append: for a `gs://...` workdir the rows of each sync go into a new part file,
`metrics.jsonl.parts/NNNNNN.jsonl`, and the parts are folded into `metrics.jsonl` when a run
starts and when it closes (`read_rows` reads a running run's rows from both).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from etils import epath

from albert_jax import paths
from albert_jax.train.config import TrainConfigError

METRICS = "metrics.jsonl"
PARTS = "metrics.jsonl.parts"
_PART = re.compile(r"^(\d+)\.jsonl$")  # (a writer's temporary `.NAME.tmp-PID` is not one)


@dataclasses.dataclass
class Upload:
    """`data` to be written at `dst` (a bucket path); `failed` is called if that fails, so the
    file is sent again at the next sync."""

    dst: str
    data: bytes
    failed: Callable[[], None] | None = None


class Tracker(Protocol):
    def write(self, step: int, scalars: dict[str, float], prefix: str) -> None: ...

    def sync(self) -> list[Upload]: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- metrics.jsonl


def _parse(text: str) -> list[dict]:
    """The rows of JSON-lines text; a line cut by a kill (or otherwise unreadable) is dropped."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "step" in row and "split" in row:
            rows.append(row)
    return rows


def _part_files(workdir: str) -> list[epath.Path]:
    """The part files of a bucket run, in the order they were written."""
    d = epath.Path(workdir) / PARTS
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _PART.match(p.name))]
    return [p for _, p in sorted(found, key=lambda x: x[0])]


def _dedupe(rows: Iterable[dict]) -> list[dict]:
    """One row per (step, split): the last one written, at the place of the first."""
    kept: dict[tuple[Any, Any], dict] = {}
    for row in rows:
        kept[row["step"], row["split"]] = row
    return list(kept.values())


def read_rows(workdir: str) -> list[dict]:
    """The metrics rows of the run in `workdir` (local or bucket), also while it runs:
    `metrics.jsonl`, then a bucket run's part files (`metrics.jsonl.parts/`, written at each
    sync), one row per (step, split), the last written kept."""
    path = epath.Path(workdir) / METRICS
    rows = _parse(path.read_text()) if path.exists() else []
    for part in _part_files(workdir):
        rows += _parse(part.read_text())
    return _dedupe(rows)


def kept(row: dict, resume_step: int) -> bool:
    """A row a run resumed at `resume_step` keeps: those before it, and that step's training and
    goodput rows (its evaluations are repeated by the resumed run; the rows past it are written
    again)."""
    at = row["step"] == resume_step and row["split"] in ("train", "goodput")  # not logged again
    return row["step"] < resume_step or at


def _dumps(rows: Iterable[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


class JsonlTracker:
    """`metrics.jsonl`. Local workdir: appended line by line. Bucket workdir: each sync's rows
    go into a new part file (`metrics.jsonl.parts/NNNNNN.jsonl`); at the start and at `close`
    every row is folded into `metrics.jsonl` and the parts are deleted.

    A run resumed at `resume_step` first drops the rows a killed run wrote past its checkpoint
    (and that step's evaluation, which the trainer repeats), so each row is written once."""

    name = "jsonl"

    def __init__(self, workdir: str, resume_step: int = 0, **_):
        self.workdir = workdir
        self._remote = paths.is_uri(workdir)
        self._path = epath.Path(workdir) / METRICS
        parts = _part_files(workdir)
        self._rows = [r for r in read_rows(workdir) if kept(r, resume_step)]
        # Numbered past any part left over, so that even a part whose deletion failed is read
        # before the new ones (read_rows keeps the last row of a step).
        self._next_part = max((int(_PART.match(p.name).group(1)) for p in parts), default=-1) + 1
        # metrics.jsonl first, the parts deleted after. A kill in between leaves parts whose
        # rows are already in metrics.jsonl, some maybe past the checkpoint: the next start
        # reads them again, keeps one row per (step, split) and applies the same resume rule,
        # so no dropped row comes back (the other order would lose the parts' rows instead).
        paths.write_text(self._path, _dumps(self._rows))
        for p in parts:
            p.unlink()
        self._pending: list[dict] = []  # bucket: the rows since the last sync
        if not self._remote:
            self._file = open(self._path, "a", buffering=1, encoding="utf-8")

    def write(self, step: int, scalars: dict[str, float], prefix: str) -> None:
        row = {"step": int(step), "split": prefix, **{k: float(v) for k, v in scalars.items()}}
        if self._remote:
            self._rows.append(row)
            self._pending.append(row)
        else:
            self._file.write(json.dumps(row) + "\n")

    def sync(self) -> list[Upload]:
        if not (self._remote and self._pending):
            return []
        dst = paths.join(self.workdir, PARTS, f"{self._next_part:06d}.jsonl")
        self._next_part += 1
        data, self._pending = _dumps(self._pending).encode("utf-8"), []
        # A part that fails is not sent again: `close` writes every row into metrics.jsonl.
        return [Upload(dst, data)]

    def close(self) -> None:
        """Local: closes the file. Bucket (after the writer's uploads are done): every row of
        the run into metrics.jsonl, then the parts deleted, as at the start."""
        if not self._remote:
            self._file.close()
            return
        parts = _part_files(self.workdir)
        paths.write_text(self._path, _dumps(_dedupe(self._rows)))
        for p in parts:
            p.unlink()
        self._pending = []


# --------------------------------------------------------------------------- TensorBoard


class LocalFiles:
    """Files written locally for a bucket path (`paths.local_mirror`): which changed since they
    were last sent (size and modification time), read now."""

    def __init__(self, local: str, remote: str):
        self.local, self.remote = local, remote
        self._sent: dict[str, tuple[int, int]] = {}

    def changed(self, names: Iterable[str] | None = None) -> list[Upload]:
        """Uploads of the files (`names` relative to `local`; None: all under it) changed since
        they were last sent."""
        if names is None:
            found = paths.files_under(self.local) if os.path.isdir(self.local) else []
            names = [os.path.relpath(f, self.local) for f in found]
        uploads = []
        for name in names:
            src = os.path.join(self.local, name)
            try:
                st = os.stat(src)
                stamp = (st.st_size, st.st_mtime_ns)
                if self._sent.get(name) == stamp:
                    continue
                with open(src, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            self._sent[name] = stamp
            uploads.append(Upload(paths.join(self.remote, name), data, self._forget(name)))
        return uploads

    def _forget(self, name: str) -> Callable[[], None]:
        return lambda: self._sent.pop(name, None)


class TensorBoardTracker:
    """TensorBoard event files in `WORKDIR/tensorboard` (for a bucket workdir: written in the
    local mirror and sent at each sync), tags `prefix/name`. Written with tensorboardX's
    synchronous record writer, not its `SummaryWriter`, whose thread appends records after
    `flush` returns: a sync would copy a file short of its last rows, or cut in a record."""

    name = "tensorboard"

    def __init__(self, workdir: str, **_):
        from tensorboardX.event_file_writer import EventsWriter

        events = os.path.join(paths.local_mirror(workdir), "tensorboard")
        remote = paths.join(workdir, "tensorboard")
        self._files = LocalFiles(events, remote) if paths.is_uri(workdir) else None
        if self._files and os.path.isdir(events):  # a killed run's events, maybe not all sent
            paths.copy_tree(events, remote)
            shutil.rmtree(events)
        os.makedirs(events, exist_ok=True)
        self._writer = EventsWriter(os.path.join(events, "events"))

    def write(self, step: int, scalars: dict[str, float], prefix: str) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        now = time.time()
        for k, v in scalars.items():
            summary = scalar(f"{prefix}/{k}", float(v))
            self._writer.write_event(Event(wall_time=now, step=int(step), summary=summary))
        self._writer.flush()

    def sync(self) -> list[Upload]:
        return self._files.changed() if self._files else []

    def close(self) -> None:
        self._writer.close()


# --------------------------------------------------------------------------- Weights & Biases


def wandb_run_id(workdir: str) -> str:
    """One wandb run per workdir: a rerun (a resume) continues the same run."""
    return hashlib.sha256(workdir.encode("utf-8")).hexdigest()[:16]


class WandbTracker:
    """A Weights & Biases run named after the workdir, its id `wandb_run_id(workdir)` and
    `resume="allow"`: a resumed run continues it. Its files go to $WANDB_DIR, else the workdir
    (a bucket workdir's local mirror); `WANDB_MODE=offline` works without a network (`wandb
    sync` sends them later). The run's config is the workdir's config.json. Scalars are
    `prefix/name` against our `step` as the x axis (`define_metric`), not wandb's own step: a
    run resumed from its checkpoint logs steps again that the killed run had logged, which
    wandb would drop if given them as its (monotonic) step."""

    name = "wandb"

    def __init__(self, workdir: str, wandb_project: str = "", **_):
        import wandb

        config_file = epath.Path(workdir) / "config.json"
        config = json.loads(config_file.read_text()) if config_file.exists() else {}
        where = os.environ.get("WANDB_DIR") or paths.local_mirror(workdir)
        os.makedirs(where, exist_ok=True)
        self._run = wandb.init(
            project=wandb_project or os.environ.get("WANDB_PROJECT") or "albert-jax",
            name=os.path.basename(workdir.rstrip("/")),
            id=wandb_run_id(workdir),
            resume="allow",
            dir=where,
            config=config,
            # the console stays ours (progress bar, one line per evaluation): train.log has it
            settings=wandb.Settings(console="off"),
        )
        self._run.define_metric("step", hidden=True)
        self._run.define_metric("*", step_metric="step")

    def write(self, step: int, scalars: dict[str, float], prefix: str) -> None:
        values = {f"{prefix}/{k}": float(v) for k, v in scalars.items()}
        self._run.log({"step": int(step), **values})

    def sync(self) -> list[Upload]:
        return []  # wandb sends in its own process

    def close(self) -> None:
        self._run.finish()


# --------------------------------------------------------------------------- choosing them

TRACKERS: dict[str, type] = {
    "jsonl": JsonlTracker,
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
}
DEFAULT = ("jsonl", "tensorboard")


def check(names: Iterable[str]) -> tuple[str, ...]:
    """`names` (`TrainerConfig.trackers`) as known trackers that can start, or a
    TrainConfigError naming what cannot: run before anything is compiled or written."""
    names = tuple(dict.fromkeys(names))
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise TrainConfigError(
            f"trackers: unknown {', '.join(map(repr, unknown))} (known: {', '.join(TRACKERS)})"
        )
    if "jsonl" not in names:
        raise TrainConfigError(
            f"trackers={','.join(names)}: 'jsonl' is required (a resumed run, the run summaries "
            f"and the sweep reports read metrics.jsonl); use "
            f"--config.trackers={','.join(('jsonl', *names))}"
        )
    if "wandb" in names:
        try:
            import wandb  # noqa: F401
        except ImportError as e:
            raise TrainConfigError(
                f"trackers: 'wandb' cannot start ({e}): install the wandb extra "
                "(`uv sync --extra wandb` or `pip install wandb`), or drop it from "
                "--config.trackers"
            ) from None
    return names


def start(names: Iterable[str], workdir: str, **options) -> list[Tracker]:
    """The trackers `names` for `workdir`; `options` (resume_step, wandb_project) go to each.
    A service that refuses to start (wandb online without a login) is a TrainConfigError."""
    started: list[Tracker] = []
    try:
        for n in check(names):
            try:
                started.append(TRACKERS[n](workdir, **options))
            except Exception as e:
                if n != "wandb":
                    raise  # our own files: the traceback says more
                raise TrainConfigError(
                    f"trackers: 'wandb' cannot start ({type(e).__name__}: {e}); log in "
                    "(`wandb login`, WANDB_API_KEY), set WANDB_MODE=offline, or drop it from "
                    "--config.trackers"
                ) from e
    except BaseException:
        for t in started:
            t.close()
        raise
    return started

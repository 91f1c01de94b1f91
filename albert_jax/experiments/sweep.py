"""Sharing-ablation sweeps: grids of pretraining and fine-tuning runs, run here or on a cluster.

The command line is `python -m pretrain.sweep` (its docstring has the usage). A sweep config's
`get_sweep()` returns a `Sweep`: a pretraining config, a fine-tuning config per task, fixed
overrides for each, and a grid of override values (any config field, named `pretrain.FIELD` or
`finetune.FIELD`). Every combination is a point; points with the same pretraining values share
one pretraining run (a *group*). A group is one job: pretrain (`python -m pretrain`), then
fine-tune every task for each of its points (`python -m finetune`, all seeds in one run), each a
subprocess with its log (`sweep.log`) and its invocations (`sweep_step.json`: the wall time of
each, and the training rows its metrics files held when it started, so that the report can drop
the first interval of each start, compilation included) in its own directory:

    DIR/data/KEY                      tokenizer + corpus, shared by runs with the same data fields
    DIR/data/finetune/NAME            a task's offline dataset (`python -m finetune.prepare NAME
                                      --out ...`): a task config's relative `task.train / dev /
                                      test` resolve under DIR (passed as `--config.task.*`
                                      overrides), never under the current directory, unless the
                                      sweep overrides `task.train` itself
    DIR/pretrain/POINT                a pretraining workdir (model in POINT/model)
    DIR/finetune/TASK/POINT           a fine-tuning workdir (summary.json over the seeds)
    DIR/finetune/TASK/...,init=none   with `random_init`: the same task from random weights of
                                      the pretrained model's shape (the control)
    DIR/results.csv, results.md, plots/   (albert_jax.experiments.sweep_report)

A step whose model or summary is on disk is done and skipped; an interrupted one resumes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from albert_jax import paths
from albert_jax.errors import InputError
from albert_jax.tasks.finetune_config import TaskSettings

SCOPES = ("pretrain", "finetune")


class SweepError(InputError):
    """A sweep config that cannot run, with the field or file that is wrong."""


@dataclasses.dataclass
class Sweep:
    pretrain_config: str  # configs/pretrain/NAME.py
    tasks: dict[str, str]  # task name -> configs/finetune/TASK.py[:ARG] ({} : pretraining only)
    grid: dict[str, list]  # 'pretrain.model.layout' | 'finetune.unshare' ... -> values
    pretrain: dict[str, Any] = dataclasses.field(default_factory=dict)  # fixed overrides
    finetune: dict[str, Any] = dataclasses.field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2)  # fine-tuning seeds of every point
    slurm: dict[str, Any] = dataclasses.field(default_factory=dict)  # submitit parameters
    paper: str = ""  # the paper's numbers for this table (Markdown), shown beside ours
    # Also fine-tune each task from random weights (`init=none`) with the pretraining run's
    # tokenizer and model shape: the control that shows what pretraining adds. One such point per
    # pretraining run and value of the other fine-tuning axes: the `finetune.unshare` axis is not
    # applied to it (the pretrained layout), a fixed `unshare` override is.
    random_init: bool = False
    # A folder (in the repository) that keeps each finished step's small files (`KEEP`: metrics,
    # results, summaries, the search, the drift) at its path under the sweep directory, with
    # the pretraining's fingerprint: a later checkout rebuilds the pretraining, and every kept
    # fine-tuning cell whose fingerprint matches is done (restored, not rerun). The report is
    # written there too (`--report_only`: from the kept cells alone). '' = none.
    results: str = ""


@dataclasses.dataclass(frozen=True)
class Point:
    values: tuple[tuple[str, Any], ...]  # (axis, value) in grid order

    def scope(self, scope: str) -> dict[str, Any]:
        return {k[len(scope) + 1 :]: v for k, v in self.values if k.startswith(scope + ".")}

    def name(self, scope: str | None = None) -> str:
        items = [(k, v) for k, v in self.values if scope is None or k.startswith(scope + ".")]
        return ",".join(f"{k.rsplit('.', 1)[-1]}={_label(v)}" for k, v in items) or "base"

    @property
    def random_init(self) -> bool:
        return RANDOM_INIT in self.values


RANDOM_INIT = ("finetune.init", "none")  # the value a random-init control point carries


def _label(v: Any) -> str:
    return (str(v) if v != "" else "default").replace("/", "_").replace(" ", "")


def _import(path: str, function: str):
    """`function()` of the config file at `path`; `FILE:ARG` (a task config taking an argument,
    e.g. `configs/finetune/suite.py:headlines`, as ml_collections reads it) calls
    `function(ARG)`."""
    path, sep, arg = paths.config_file(path).partition(":")
    if not os.path.exists(path):
        raise SweepError(f"{path}: no such config file")
    if os.path.isdir(path):
        raise SweepError(f"{path}: is a directory, not a config file")
    spec = importlib.util.spec_from_file_location(f"_sweep_{function}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:  # the file and line to fix, not a traceback
        raise SweepError(f"{e.filename}, line {e.lineno}: {e.msg}") from None
    if not hasattr(module, function):
        raise SweepError(f"{path}: defines no {function}()")
    try:
        return getattr(module, function)(arg) if sep else getattr(module, function)()
    except ValueError as e:  # the config's own refusal of its argument (or of none)
        raise SweepError(f"{path}{sep}{arg}: {e}") from None


def load(path: str) -> Sweep:
    return _import(path, "get_sweep")


def apply_sets(sweep: Sweep, sets: list[str]) -> Sweep:
    """`--set pretrain.total_steps=200`: fixed overrides from the command line (a value that is
    also a grid axis replaces the axis by that one value)."""
    pre, fine, grid = dict(sweep.pretrain), dict(sweep.finetune), dict(sweep.grid)
    for item in sets:
        key, sep, value = item.partition("=")
        scope = key.split(".", 1)[0]
        if not sep or scope not in SCOPES + ("seeds",):
            raise SweepError(
                f"--set {item!r}: expected pretrain.FIELD=V, finetune.FIELD=V or seeds="
            )
        if scope == "seeds":
            try:
                seeds = tuple(int(s) for s in value.split(",") if s)
            except ValueError:
                raise SweepError(
                    f"--set {item!r}: seeds must be integers, e.g. seeds=0,1"
                ) from None
            sweep = dataclasses.replace(sweep, seeds=seeds)
            continue
        grid.pop(key, None)
        (pre if scope == "pretrain" else fine)[key.split(".", 1)[1]] = value
    return dataclasses.replace(sweep, pretrain=pre, finetune=fine, grid=grid)


def points(sweep: Sweep) -> list[Point]:
    for key in sweep.grid:
        if key.split(".", 1)[0] not in SCOPES or "." not in key:
            raise SweepError(f"grid axis {key!r}: must be pretrain.FIELD or finetune.FIELD")
    axes = list(sweep.grid.items())
    return [
        Point(tuple(zip([k for k, _ in axes], combo, strict=True)))
        for combo in itertools.product(*[v for _, v in axes])
    ]


def groups(sweep: Sweep) -> list[list[Point]]:
    """Points grouped by their pretraining values, in grid order."""
    out: dict[str, list[Point]] = {}
    for p in points(sweep):
        out.setdefault(p.name("pretrain"), []).append(p)
    return list(out.values())


def control_points(sweep: Sweep, group: list[Point]) -> list[Point]:
    """The group's random-init points (none unless `sweep.random_init`): its points without
    the `finetune.unshare` axis, deduplicated, each with `init=none`."""
    if not sweep.random_init or not sweep.tasks:  # a control is a fine-tuning run
        return []
    out = {}
    for p in group:
        values = tuple((k, v) for k, v in p.values if k != "finetune.unshare") + (RANDOM_INIT,)
        out.setdefault(values, Point(values))
    return list(out.values())


def _flag(key: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    return f"--config.{key}={value}"


def data_dir(sweep: Sweep, point: Point, workdir: str) -> str:
    """Runs whose data fields agree share one tokenizer and corpus."""
    fields = {**sweep.pretrain, **point.scope("pretrain")}
    fields = {k: v for k, v in fields.items() if k.startswith("data.")}
    key = hashlib.sha1(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return os.path.join(workdir, "data", key)


@dataclasses.dataclass
class Step:
    """One subprocess of a group: its command, its directory, and the file that says it is done."""

    kind: str  # prepare | pretrain | finetune
    label: str
    command: list[str]
    workdir: str
    done_file: str
    marker: bool = False  # the sweep writes done_file (else the command makes it)
    # flags known only when the step starts (a later seed: the rate the first seed's search chose)
    late_flags: Callable[[], list[str]] | None = None
    after: Callable[[], None] | None = None  # once it finished (keep its files, merge seeds)
    kept: Kept | None = None  # where its files are kept (`Sweep.results`)
    restored: Callable[[], None] | None = None  # once its kept files are back (merge seeds)

    def done(self) -> bool:
        """Its done file is here, or its kept cell matches this pretraining (then restored)."""
        if os.path.exists(self.done_file):
            return True
        if not (self.kept and self.kept.restore(self.workdir, self.done_file)):
            return False
        if self.restored:
            self.restored()
        return True


@dataclasses.dataclass
class Kept:
    """`Sweep.results`: the mirror of the sweep directory `workdir` at `root`, holding each
    finished step's small files. `pretrain_dir`: the pretraining its fine-tuning cells start from
    (their fingerprint must be its own)."""

    root: str
    workdir: str
    pretrain_dir: str

    def path(self, step_dir: str) -> str:
        return os.path.join(self.root, os.path.relpath(step_dir, self.workdir))

    def fingerprint(self) -> str | None:
        """The pretraining's fingerprint (None before it is built), computed once."""
        record = os.path.join(self.pretrain_dir, FINGERPRINT)
        if not os.path.exists(record):
            model = os.path.join(self.pretrain_dir, "model")
            if not os.path.exists(os.path.join(model, "checkpoint.json")):
                return None
            _write_json(record, {"sha256": fingerprint(model)})
        with open(record) as f:
            return json.load(f)["sha256"]

    def keep_pretraining(self) -> None:
        """The pretraining's files kept (once), after checking that a rebuilt one is the one the
        kept cells started from."""
        kept = os.path.join(self.path(self.pretrain_dir), FINGERPRINT)
        if not os.path.exists(kept):
            self.fingerprint()  # computed and written beside the model, then kept
            self.keep(self.pretrain_dir, cell=False)
            return
        with open(kept) as f:
            theirs = json.load(f)["sha256"]
        if theirs != self.fingerprint():
            raise SweepError(
                f"{self.pretrain_dir}/model is not the pretraining the kept results in "
                f"{os.path.dirname(kept)} started from (fingerprint {self.fingerprint()[:12]}, "
                f"theirs {theirs[:12]}): their cells cannot be resumed from it. Move {self.root} "
                "away to start the study over"
            )

    def keep(self, step_dir: str, cell: bool) -> None:
        """Copy the step's small files to the mirror; a fine-tuning `cell` also gets `CELL`: the
        pretraining's fingerprint and the machine it ran on."""
        dest = self.path(step_dir)
        _copy(step_dir, dest, KEEP)
        if cell:
            _write_json(os.path.join(dest, CELL), {"fingerprint": self.fingerprint(), **machine()})

    def restore(self, step_dir: str, done_file: str) -> bool:
        """A kept fine-tuning cell of this pretraining: its files copied back into `step_dir`
        (so the steps after it and the report read them as if it had run here); False when
        there is none, or it started from another pretraining."""
        src = self.path(step_dir)
        if not os.path.exists(os.path.join(src, CELL)) or not os.path.exists(self.path(done_file)):
            return False
        with open(os.path.join(src, CELL)) as f:
            if json.load(f).get("fingerprint") != self.fingerprint():
                return False
        _copy(src, step_dir, (*KEEP, CELL))
        return True


def _copy(src: str, dest: str, rels) -> None:
    """The files `rels` (paths under `src`) that exist, to the same paths under `dest`."""
    for rel in rels:
        if os.path.exists(os.path.join(src, rel)):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(src, rel), os.path.join(dest, rel))


# What `Sweep.results` keeps of a finished step (paths under its directory): kilobytes; the
# checkpoints, predictions and logs stay in the sweep directory.
KEEP = (
    "summary.json", "results.json", "config.json", "metrics.jsonl", "drift.jsonl",
    "lr_search.json", "best.json", "sweep_step.json", "model/config.json", "best/config.json",
    "fingerprint.json",
)  # fmt: skip
CELL = "cell.json"  # a kept fine-tuning cell's fingerprint and machine
FINGERPRINT = "fingerprint.json"  # in a pretraining step's directory


def fingerprint(model_dir: str) -> str:
    """SHA-256 of a checkpoint's architecture and every parameter's name, dtype, shape and
    bytes: equal exactly when the pretraining rebuilt bit for bit."""
    import numpy as np
    from flax import traverse_util

    from albert_jax.checkpoints import checkpoint

    config, params = checkpoint.load(model_dir)
    h = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode())
    for name, value in sorted(traverse_util.flatten_dict(params, sep="/").items()):
        a = np.asarray(value)
        h.update(f"{name}:{a.dtype}:{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def machine() -> dict[str, Any]:
    """What a cell ran on (a task's arms must share one kind of device)."""
    import jax

    return {"device": f"{jax.default_backend()}: {jax.devices()[0].device_kind}",
            "cpus": os.cpu_count(), "finished": round(time.time())}  # fmt: skip


def _write_json(path: str, value: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(tmp, path)  # a kill never leaves half a file


SPLITS = ("train", "dev", "test")


def prepared_data(sweep: Sweep, config_path: str, workdir: str) -> tuple[str, dict[str, str]]:
    """(NAME, {'task.train': DIR/data/finetune/NAME/train.jsonl, ...}) for a task config whose
    data `python -m finetune.prepare NAME` builds (`use_prepared`): its relative paths resolved
    under the sweep directory, so that the sweep's data is its own and not the current
    directory's. ('', {}) when it builds none or the sweep sets `task.train` itself."""
    config = _import(config_path, "get_config")
    task = TaskSettings.from_config(config.task)
    name = task.prepare
    axes = {k.split(".", 1)[1] for k in sweep.grid if k.startswith("finetune.")}
    own = set(sweep.finetune) | axes
    if not name or "task.train" in own:
        return "", {}
    files = {}
    for split in SPLITS:
        path = task.path(split)
        if path and f"task.{split}" not in own:  # a split the sweep names keeps its own file
            files[f"task.{split}"] = os.path.join(os.path.abspath(workdir), path)
    return name, files


def steps(sweep: Sweep, group: list[Point], workdir: str) -> list[Step]:
    """The group's pretraining, then per task and point one fine-tuning run per seed
    (DIR/finetune/TASK/POINT/seed_S): the first seed's run searches the learning rate when its
    config does, the later ones train with the rate it chose. After each seed the point's
    `summary.json` is merged over the seeds done so far."""
    py = [sys.executable, "-m"]
    workdir = os.path.abspath(workdir)
    first = group[0]
    pname = first.name("pretrain")
    pdir = os.path.join(workdir, "pretrain", pname)
    ddir = data_dir(sweep, first, workdir)
    kept = Kept(os.path.abspath(sweep.results), workdir, pdir) if sweep.results else None
    pre = {**sweep.pretrain, **first.scope("pretrain"), "data.data_dir": ddir}
    pre_flags = [_flag(k, v) for k, v in pre.items()]

    out = [
        Step(
            "pretrain",
            f"pretrain {pname}",
            [*py, "albert_jax.pretrain", "--config", sweep.pretrain_config, "--workdir", pdir]
            + pre_flags,
            pdir,
            os.path.join(pdir, "model", "checkpoint.json"),
            after=kept.keep_pretraining if kept else None,
        )
    ]
    model = f"{pdir}/model"
    data = {task: prepared_data(sweep, c, workdir)[1] for task, c in sweep.tasks.items()}
    for point in group + control_points(sweep, group):
        fine = {**sweep.finetune, **point.scope("finetune")}
        if point.random_init:  # the pretrained model's tokenizer and shape, not its weights
            fine.pop("init")
            start = {"init": "none", "tokenizer": model, "model_from": model}
        else:
            start = {"init": model}
        for task, config in sweep.tasks.items():
            fdir = os.path.join(workdir, "finetune", task, point.name())
            flags_ = [_flag(k, v) for k, v in start.items()]
            flags_ += [_flag(k, v) for k, v in data[task].items()]
            flags_ += [_flag(k, v) for k, v in fine.items()]
            for seed in sweep.seeds:
                sdir = os.path.join(fdir, f"seed_{seed}")
                out.append(
                    Step(
                        "finetune",
                        f"{task} {point.name()} seed {seed}",
                        py + ["albert_jax.finetune", "--config", config, "--workdir", sdir]
                        + flags_ + [f"--config.seeds={seed}"],
                        sdir,
                        os.path.join(sdir, "summary.json"),
                        late_flags=None if seed == sweep.seeds[0] else
                        functools.partial(searched_rate, fdir, sweep.seeds[0]),
                        after=functools.partial(_seed_done, kept, fdir, sdir, sweep.seeds),
                        kept=kept,
                        restored=functools.partial(_merge, fdir, sweep.seeds),
                    )
                )  # fmt: skip
    return out


def searched_rate(fdir: str, first_seed: int) -> list[str]:
    """The later seeds' flag: the learning rate the first seed's search chose (none when its
    config does not search)."""
    path = os.path.join(fdir, f"seed_{first_seed}", "lr_search.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [_flag("optim.learning_rate", json.load(f)["chosen"])]


def _merge(fdir: str, seeds: tuple[int, ...]) -> None:
    _write_json(os.path.join(fdir, "summary.json"), merge_seeds(fdir, seeds))


def _seed_done(kept: Kept | None, fdir: str, sdir: str, seeds: tuple[int, ...]) -> None:
    _merge(fdir, seeds)
    if kept:
        kept.keep_pretraining()  # also when it was built before the sweep kept anything
        kept.keep(sdir, cell=True)
        kept.keep(fdir, cell=False)


def merge_seeds(fdir: str, seeds: tuple[int, ...]) -> dict[str, Any]:
    """The point's summary over its seeds' runs (each a one-seed `summary.json`): per-seed
    results and mean ± std as `python -m finetune` writes for several seeds, with the first
    seed's learning-rate search."""
    from albert_jax.jobs.run import over_seeds

    done = {}
    for seed in seeds:
        path = os.path.join(fdir, f"seed_{seed}", "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                done[seed] = json.load(f)
    if not done:
        return {}
    first = done[min(done, key=seeds.index)]
    per_seed = {s: d["per_seed"][str(s)] for s, d in done.items()}
    same = {k: first[k] for k in ("metric", "layout", "init", "random_init", "lr_search")
            if k in first}  # fmt: skip
    return {**same, **over_seeds(per_seed)}


def prepare_steps(sweep: Sweep, workdir: str) -> list[Step]:
    """Everything the groups share, built once before any of them runs (so that cluster jobs do
    not race on it): one tokenizer + corpus per distinct data directory, and each offline
    fine-tuning dataset (`python -m finetune.prepare NAME --out DIR/data/finetune/NAME`) a task
    config names (`prepared_data`); not left to fine-tuning's build on first use."""
    out, seen = [], set()
    for path in sweep.tasks.values():
        name, files = prepared_data(sweep, path, workdir)
        if name and name not in seen:
            seen.add(name)
            done = files["task.train"]
            cmd = [sys.executable, "-m", "albert_jax.finetune.prepare", name]
            cmd += ["--out", os.path.dirname(done)]
            # its log beside the dataset, not in it: prepare replaces the dataset's directory
            log_dir = os.path.dirname(done) + ".sweep"
            out.append(Step("prepare", f"{name} dataset", cmd, log_dir, done))
    for group in groups(sweep):
        ddir = data_dir(sweep, group[0], workdir)
        if ddir in seen:
            continue
        seen.add(ddir)
        data = {**sweep.pretrain, **group[0].scope("pretrain")}
        flags_ = [_flag(k, v) for k, v in data.items() if k.startswith("data.")]
        flags_.append(_flag("data.data_dir", os.path.abspath(ddir)))
        module = "albert_jax.pretrain.prepare_data"
        cmd = [sys.executable, "-m", module, "--config", sweep.pretrain_config]
        done = os.path.join(ddir, "sweep_prepared.json")
        out.append(
            Step("prepare", f"data {os.path.basename(ddir)}", cmd + flags_, ddir, done, True)
        )
    return out


def check(sweep: Sweep) -> None:
    """Every override names a field of its config and each of its values parses as that field's
    type, before any job starts (and before the data is built)."""
    cases = [(sweep.pretrain_config, "pretrain")] + [(c, "finetune") for c in sweep.tasks.values()]
    for path, scope in cases:
        config = _import(path, "get_config")
        axes = [k for k in sweep.grid if k.startswith(scope + ".")]
        keys = set(getattr(sweep, scope)) | {k.split(".", 1)[1] for k in axes}
        if scope == "finetune" and sweep.random_init:  # what the control's command sets
            keys |= {"init", "tokenizer", "model_from"}
        for key in sorted(keys):
            node = config
            for part in key.split("."):
                if not hasattr(node, "keys") or part not in node:
                    there = ", ".join(sorted(node.keys())) if hasattr(node, "keys") else "-"
                    raise SweepError(
                        f"{scope}.{key}: {path}'s config has no field {part!r} (fields there: "
                        f"{there})"
                    )
                node = node[part]
        values = {k: [v] for k, v in getattr(sweep, scope).items()}
        values.update({k.split(".", 1)[1]: v for k, v in sweep.grid.items() if k in axes})
        for key, options in values.items():
            for value in options:
                _check_value(path, scope, key, value)


def _check_value(path: str, scope: str, key: str, value: Any) -> None:
    """`value` parses as the field's type, as the run's own command line will parse it (a bad
    value would otherwise fail only when that run starts, after the data is built)."""
    from absl import flags
    from ml_collections import config_flags

    argv = ["sweep", "--config", paths.config_file(path), _flag(key, value)]
    parsed = flags.FlagValues()
    config_flags.DEFINE_config_file("config", flag_values=parsed, sys_argv=argv)
    try:
        parsed(argv)
    except flags.Error as e:
        reason = str(e).strip().splitlines()[-1].split(": ", 1)[-1]
        raise SweepError(f"{scope}.{key}={value!r}: {reason}") from None


RECORD = "sweep_step.json"  # a step's invocations, in its directory


def metrics_rows(workdir: str) -> dict[str, list[list[float]]]:
    """[step, step_time_s] of the training rows in WORKDIR's metrics files (its own and its
    seeds'), by path relative to WORKDIR."""
    out = {}
    for rel in ["metrics.jsonl"] + [os.path.join(d, "metrics.jsonl") for d in _subdirs(workdir)]:
        path = os.path.join(workdir, rel)
        if os.path.exists(path):
            with open(path) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            train = [r for r in rows if r.get("split") == "train" and "step_time_s" in r]
            out[rel] = [[r["step"], r["step_time_s"]] for r in train]
    return out


def _subdirs(workdir: str) -> list[str]:
    return sorted(d for d in os.listdir(workdir) if os.path.isdir(os.path.join(workdir, d)))


def read_record(workdir: str) -> dict:
    path = os.path.join(workdir, RECORD)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        record = json.load(f)
    if "runs" not in record and "wall_s" in record:  # written before invocations were kept
        record["runs"] = [{"wall_s": record["wall_s"]}]
    return record


def _write_record(workdir: str, record: dict) -> None:
    record["wall_s"] = round(sum(r.get("wall_s") or 0.0 for r in record["runs"]), 1)
    tmp = os.path.join(workdir, RECORD + ".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, os.path.join(workdir, RECORD))  # a kill never leaves half a record


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """In a step's process, before it starts (Linux): SIGKILL when the sweep dies. A sweep killed
    outright would otherwise leave its step running, holding the step's workdir, and the rerun
    would find it busy. SIGKILL, not SIGTERM: a step resumes from its last checkpoint anyway,
    and one still saving on SIGTERM would be in the rerun's way."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the sweep died before the prctl
            os._exit(1)


def run_step(step: Step, progress: str) -> float:
    """Run one step (its output to STEP_DIR/sweep.log); returns its wall time. Each invocation
    is recorded in STEP_DIR/sweep_step.json before it starts (with the training rows already
    logged: the report drops the first new one, compilation included) and its wall time when it
    ends; `wall_s` is their sum. One killed outright (no time recorded) is taken to have lasted
    until its last line in sweep.log."""
    os.makedirs(step.workdir, exist_ok=True)
    log = os.path.join(step.workdir, "sweep.log")
    record = read_record(step.workdir)
    runs = record.setdefault("runs", [])
    for run in runs:
        if run.get("wall_s") is None and "started" in run and os.path.exists(log):
            run["wall_s"], run["killed"] = round(os.path.getmtime(log) - run["started"], 1), True
    print(f"{progress} {step.label} ...", flush=True)
    command = step.command + (step.late_flags() if step.late_flags else [])
    t0 = time.time()
    runs.append({"started": t0, "rows": metrics_rows(step.workdir)})
    record["command"] = command
    _write_record(step.workdir, record)
    rc = None
    try:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(command)}\n")
            f.flush()
            rc = subprocess.call(
                command,
                stdout=f,
                stderr=subprocess.STDOUT,
                cwd=os.getcwd(),
                preexec_fn=functools.partial(_die_with_parent, os.getpid()),
            )
    finally:  # failed or interrupted: its time still counts
        wall = time.time() - t0
        runs[-1]["wall_s"] = round(wall, 1)
        if rc == 0:
            record["finished"] = time.time()
        _write_record(step.workdir, record)
    if rc != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-30:])
        raise SweepError(f"{step.label} failed (exit {rc}); log {log}:\n{tail}")
    if step.marker:
        with open(step.done_file, "w") as f:
            json.dump({k: record[k] for k in ("command", "wall_s", "finished")}, f)
    elif not os.path.exists(step.done_file):
        raise SweepError(f"{step.label}: finished but did not write {step.done_file}")
    if step.after:
        step.after()
    return wall


def run_local(all_steps: list[Step]) -> None:
    """Each step not done, in order. Done is asked again just before a step runs: a kept cell
    is recognized only once the pretraining it started from is built."""
    done = sum(s.done() for s in all_steps)
    print(f"sweep: {len(all_steps)} steps, {done} already done", flush=True)
    t0, spent = time.time(), []
    for i, step in enumerate(all_steps):
        if step.done():
            continue
        left = sum(not s.done() for s in all_steps[i:])
        eta = f", ~{sum(spent) / len(spent) * left / 60:.0f} min left" if spent else ""
        n = len(spent) + 1
        spent.append(
            run_step(step, f"[{n}/{n + left - 1}, {(time.time() - t0) / 60:.0f} min{eta}]")
        )


def run_group(config_path: str, workdir: str, sets: list[str], index: int) -> str:
    """One cluster job: group `index` of the sweep (importable, so submitit can pickle it)."""
    sweep = apply_sets(load(config_path), sets)
    run_local(steps(sweep, groups(sweep)[index], workdir))
    return workdir


def group_command(config_path: str, workdir: str, sets: list[str], index: int) -> str:
    parts = [
        sys.executable,
        "-m",
        "albert_jax.pretrain.sweep",
        "--config",
        config_path,
        "--workdir",
        workdir,
    ]
    parts += [f"--set={s}" for s in sets] + [f"--group={index}"]
    return " ".join(parts)


def submit(config_path, workdir, sets, indices, launcher: str, sweep: Sweep) -> list[Any]:
    """Submit one job per group with submitit (`slurm`, or `local` / `debug` on this machine)."""
    import submitit

    cluster = None if launcher == "slurm" else launcher
    executor = submitit.AutoExecutor(folder=os.path.join(workdir, "submitit"), cluster=cluster)
    if sweep.slurm and launcher == "slurm":
        executor.update_parameters(**sweep.slurm)
    jobs = [executor.submit(run_group, config_path, workdir, sets, i) for i in indices]
    for i, job in zip(indices, jobs, strict=True):
        print(f"group {i}: job {job.job_id}", flush=True)
    return jobs

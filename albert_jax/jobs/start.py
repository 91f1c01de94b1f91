"""What is checked before a fine-tuning run starts: the dataset to build (`dataset_to_build`), the
data files (`check_files`), a rerun's inputs (`check_rerun`). The starting weights themselves are
the task's (`albert_jax.tasks.init_source`)."""

from __future__ import annotations

import json
import os

from etils import epath

from albert_jax.data import tables
from albert_jax.tasks.finetune_config import FinetuneError, TaskSettings
from albert_jax.train.config import TrainerConfig

SPLITS = ("train", "dev", "test")


def dataset_to_build(config) -> str:
    """The `task.prepare` dataset to build before the run ('' if none): only when its default
    place `task.prepare_dir` does not exist yet and every split names its own file there
    (train.EXT, dev.EXT, test.EXT, one extension). A missing file anywhere else is the user's (a
    typo in their own directory must not have ours built over it), and a dataset already there
    is never built again (its files may have been edited): `check_files` names the file."""
    t = TaskSettings.from_config(config.task)
    name, home = t.prepare, t.prepare_dir
    if not name or not home or not t.train or epath.Path(home).exists():
        return ""
    given = {split: t.path(split) for split in SPLITS if t.path(split)}
    exts = {os.path.splitext(path)[1] for path in given.values()}
    for split, path in given.items():
        stem, where = os.path.splitext(os.path.basename(path))[0], os.path.dirname(path)
        if stem != split or os.path.abspath(where) != os.path.abspath(home) or len(exts) > 1:
            return ""
    return name


def check_files(config) -> None:
    """Every data file named in task.train / dev / test and the extra splits exists (a file, or
    a directory of files: RACE's dev/). Of a dataset reference (`albert_jax.data.tables`), the
    directory an `hf:` one names as a path; hub names and TFDS datasets are found when read."""
    t = TaskSettings.from_config(config.task)
    for split in t.splits:
        path = t.path(split)
        if path and tables.is_reference(path):
            if why := tables.missing(path):
                raise FinetuneError(f"task.{split} {why}")
            continue
        if path and not epath.Path(path).exists():
            name, home = t.prepare, t.prepare_dir
            hint = ""
            if t.benchmark:  # a preset's relative names, under the benchmark's folder
                file = t.extras.get(split) or getattr(t, split)
                hint = (
                    f" (task.data_dir={t.data_dir!r}: name the folder that holds the "
                    f"benchmark's files as it ships them, DIR/{file} here, e.g. "
                    "--config.task.data_dir=GLUE_DIR for GLUE_DIR/CoLA/train.tsv)"
                )
            elif name and home and epath.Path(home).exists():
                hint = (
                    f" ({home} exists and is not built again over its files; `python -m "
                    f"finetune.prepare {name} --out {home}` rebuilds it)"
                )
            elif name and home:
                hint = (
                    f" (the {name} dataset is only built at its default place {home}; run "
                    f"`python -m finetune.prepare {name} --out DIR` to build it elsewhere)"
                )
            raise FinetuneError(f"task.{split} {path} does not exist{hint}")


# What a rerun must keep to resume (or re-report) a run: its data and task settings (every
# `task.*` key) and its starting point. Schedules, seeds and the optimizer are left out: the
# saved config.json holds them resolved (steps from epochs, the searched learning rate).
RESUME_KEYS = ("init", "unshare", "fresh_params", "tokenizer", "model_from", "max_train_examples")


def check_rerun(config, workdir: str) -> None:
    """A rerun on a workdir with a run in it resumes that run: with other inputs its checkpoints,
    best model and results would be the old inputs' under the new config.json. Refused, naming
    each changed key, unless `start_over` is set."""
    if TrainerConfig.from_config(config).start_over:
        return
    wd = epath.Path(workdir)  # several seeds: each seed_S has its own
    saved = [wd / "config.json"] if (wd / "config.json").exists() else wd.glob("seed_*/config.json")
    saved = sorted(saved)
    if not saved:
        return
    old = json.loads(saved[0].read_text())
    new = json.loads(config.to_json_best_effort())
    changed = []
    task_keys = [f"task.{k}" for k in new.get("task", {}) if k in old.get("task", {})]
    for key in [k for k in RESUME_KEYS if k in old and k in new] + task_keys:
        a, b = old, new
        for part in key.split("."):
            a, b = a[part], b[part]
        if a != b:
            changed.append(f"{key} was {a!r}, now {b!r}")
    if changed:
        raise FinetuneError(
            f"{workdir} holds a run with other inputs ({'; '.join(changed)}): rerun with its "
            "settings to resume it, or pass --config.start_over=True to start over"
        )

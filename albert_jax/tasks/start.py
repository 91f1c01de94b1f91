"""A fine-tuning run's starting point: the checkpoint named by `config.init` with the sub-blocks
`config.unshare` names unshared, or, for the random-init control (`init='none'`), a source with
the shape of `model_from`, a tokenizer and no weights (`blank_source`: also what
`FinetuneTask.from_config` builds a task on); and what is checked before a run starts: the
dataset to build, the data files, a rerun's inputs."""

from __future__ import annotations

import json
import os

from etils import epath

from albert_jax.checkpoints.source import ConversionError, Source, describe
from albert_jax.model import presets, sharing
from albert_jax.tasks.finetune_config import FinetuneError, TaskSettings
from albert_jax.train.config import TrainerConfig
from albert_jax.train.workdir import load_source, read_config, read_tokenizer

UNSHARE = {"": None, "all": ("attention", "ffn"), "attention": ("attention",), "ffn": ("ffn",)}


RANDOM_INIT = "none"  # config.init: no checkpoint, every weight freshly initialized


def load_init(init: str, unshare: str = "", *, tokenizer: str = "", model_from: str = ""):
    """(Source, notes): the checkpoint at `init` with the named sub-blocks unshared. With
    `init='none'` (the random-init control) no weights are read: the Source has the shape of
    `model_from` (`random_init_source`), the tokenizer at `tokenizer` and no parameters, so the
    trainer keeps every leaf of the model's own initialization, as `fresh_params='.*'` does."""
    if not init:
        raise FinetuneError(
            "config.init is empty: name the checkpoint to fine-tune (ours, a transformers "
            "directory, a Google TF1 checkpoint or a pretraining workdir), or 'none' for random "
            "weights"
        )
    if unshare not in UNSHARE:
        raise FinetuneError(f"unshare must be one of {sorted(UNSHARE)}, got {unshare!r}")
    if init == RANDOM_INIT:
        source, notes = random_init_source(tokenizer, model_from)
    else:
        source, notes = load_source(init), []
    before = source.config.layout
    blocks = UNSHARE[unshare] or ()
    L = source.config.num_layers
    groups = {f"{b}_groups": L for b in blocks}
    if groups and source.params:
        source.params, source.config = sharing.regroup(source.params, source.config, **groups)
    elif groups:  # random weights: only the shape changes
        source.config = source.config.replace(**groups)
    notes += [f"layout {before} -> {source.config.layout}"] if groups else []
    return source, notes


def random_init_source(tokenizer: str, model_from: str):
    """(Source without parameters, notes) for `init='none'`: the model config of `model_from`
    (a checkpoint, pretraining workdir, config.json or preset: `convert.read_config`) with the
    vocabulary of the tokenizer directory `tokenizer`."""
    if not tokenizer:
        raise FinetuneError(
            "--config.init=none needs --config.tokenizer=DIR (a tokenizer directory, checkpoint "
            "or pretraining workdir, e.g. runs/cpu_small/model or runs/cpu_small/data/tokenizer):"
            " random weights come without a tokenizer"
        )
    if not model_from:
        raise FinetuneError(
            "--config.init=none needs --config.model_from=SRC for the model's shape: a "
            "checkpoint or pretraining workdir (its config only; e.g. runs/cpu_small/model), "
            f"its config.json, or a preset ({', '.join(presets.NAMES)})"
        )
    try:
        tok = read_tokenizer(tokenizer)
    except ConversionError as e:
        raise FinetuneError(f"--config.tokenizer: {e}") from e
    if tok is None:
        raise FinetuneError(f"--config.tokenizer={tokenizer}: no tokenizer there")
    return blank_source(tok, model_from, tokenizer)


def blank_source(tok, model_from: str, tokenizer: str = "given") -> tuple[Source, list[str]]:
    """(Source without parameters, notes): the model config of `model_from` (a checkpoint,
    pretraining workdir, config.json or preset: `read_config`) with the vocabulary of the
    tokenizer `tok` (named `tokenizer` in the notes)."""
    try:
        config = read_config(model_from)
    except ConversionError as e:
        raise FinetuneError(
            f"--config.model_from: {e} (expected a checkpoint, pretraining workdir, config.json "
            f"or preset: {', '.join(presets.NAMES)})"
        ) from e
    vocab = []
    if config.vocab_size != tok.vocab_size:  # the embeddings are fresh: the tokenizer decides
        vocab = [f"vocab_size {config.vocab_size} -> {tok.vocab_size} (the tokenizer's)"]
        config = config.replace(vocab_size=tok.vocab_size)
    shape = f"the shape of {model_from} ({describe(config)}), tokenizer {tokenizer}"
    notes = [f"random init (init=none): {shape}", *vocab]
    location = f"random weights (init=none, shape of {model_from})"
    return Source(config, {}, tok, RANDOM_INIT, location), notes


# ---------------------------------------------------------------- before a run starts

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
    """Every data file named in task.train / dev / test exists (a file, or a directory of
    files: RACE's dev/)."""
    t = TaskSettings.from_config(config.task)
    for split in SPLITS:
        path = t.path(split)
        if path and not epath.Path(path).exists():
            name, home = t.prepare, t.prepare_dir
            hint = ""
            if name and home and epath.Path(home).exists():
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

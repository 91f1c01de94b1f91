"""Runs that survive users (issue 28): a bad path, file, flag or setting ends the command with
one `error:` line naming it and exit status 2, before any model is built, and nothing is written
(above all: no file of the user's is deleted or overwritten)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import pytest

from albert_jax.data.finetuning import records as D
from albert_jax.experiments import datasets
from albert_jax.jobs import start
from albert_jax.tasks import finetuning as F
from albert_jax.tasks import pretraining, tagging
from albert_jax.tasks.finetune_config import TaggingSettings
from albert_jax.train import optim, trainer
from albert_jax.train.config import Plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizer_sp")
FT = os.path.join(ROOT, "configs", "finetune")
CPU_SMALL = os.path.join(ROOT, "configs", "pretrain", "cpu_small.py")
# The random-init control needs no checkpoint (its shape from a preset): nothing slow to read.
RANDOM = [
    "--config.init=none",
    f"--config.tokenizer={TOKENIZER}",
    "--config.model_from=albert-base",
]


def error_line(args: list[str], cwd) -> str:
    """`python -m ARGS`'s one stderr line, checked to be an `error:` line with exit status 2."""
    proc = subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def finetune(config: str, tmp_path, *flags) -> str:
    work = tmp_path / "run"
    line = error_line(["albert_jax.finetune", "--config", os.path.join(FT, config),
                       "--workdir", str(work), *flags], tmp_path)  # fmt: skip
    assert not work.exists()  # validated before the workdir is made
    return line


def hashes(directory) -> dict[str, str]:
    return {
        name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(directory))
    }


def tree(directory) -> dict[str, str]:
    """`hashes` of every file under `directory`, by relative path (empty directories too)."""
    out = {}
    for root, dirs, names in os.walk(directory):
        rel = os.path.relpath(root, directory)
        out.update({os.path.join(rel, d) + "/": "" for d in dirs})
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.join(rel, name)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture
def tsv(tmp_path):
    good = tmp_path / "good.tsv"
    good.write_text("text\tlabel\ngood room\tpos\nbad room\tneg\n")
    return good


# ---- 1. a typo in a user's own path: never a dataset built over their files -------------------
def test_typo_in_a_users_path_keeps_every_file_and_names_the_missing_one(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in ("train_mine.conll", "dev.conll", "test.conll"):
        (d / name).write_text(f"{name}\tO\nword\tB-PER\n\n")
    before = hashes(d)
    line = finetune(
        "ner.py", tmp_path, f"--config.task.train={d}/train_mnie.conll",
        f"--config.task.dev={d}/dev.conll", f"--config.task.test={d}/test.conll",
    )  # fmt: skip
    assert hashes(d) == before
    assert line.startswith(f"error: task.train {d}/train_mnie.conll does not exist")
    assert "python -m finetune.prepare ner --out DIR" in line
    assert sorted(os.listdir(tmp_path)) == ["d"]  # nothing built, not even data/finetune/ner


def test_a_dataset_is_built_only_where_its_config_puts_it(tmp_path, monkeypatch):
    from albert_jax.configs.finetune import ner

    monkeypatch.chdir(tmp_path)
    config = ner.get_config()
    assert start.dataset_to_build(config) == "ner"  # data/finetune/ner/{train,dev,test}.conll
    config.task.dev = "elsewhere/dev.conll"
    assert start.dataset_to_build(config) == ""
    config = ner.get_config()
    config.task.train = "data/finetune/ner/train_mnie.conll"
    assert start.dataset_to_build(config) == ""
    with pytest.raises(F.FinetuneError, match="task.train data/finetune/ner/train_mnie.conll does"):
        start.check_files(config)
    for split in ("train", "dev", "test"):  # a directory of files is a split too (RACE's dev/)
        (tmp_path / split).mkdir()
        config.task[split] = str(tmp_path / split)
    start.check_files(config)
    assert start.dataset_to_build(config) == ""


def test_prepare_replaces_only_a_directory_it_wrote(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.conll").write_text("my own data\n")
    before = hashes(mine)
    with pytest.raises(D.DataError, match=r"mine exists and holds files .*\(train.conll\)"):
        datasets.prepare("ner", mine)  # refused before the build (no corpus read)
    line = error_line(["albert_jax.finetune.prepare", "ner", "--out", str(mine)], tmp_path)
    assert "finetune.prepare did not write (train.conll)" in line
    assert hashes(mine) == before and sorted(os.listdir(tmp_path)) == ["mine"]
    # Ours: marked (and only what the marker lists), or an older unmarked build, or empty.
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "train.jsonl").write_text("{}\n")
    (ours / datasets.MARKER).write_text(json.dumps({"dataset": "x", "files": ["train.jsonl"]}))
    datasets._check_replaceable(str(ours))
    (ours / "notes.txt").write_text("mine")
    with pytest.raises(D.DataError, match=r"\(notes.txt\)"):
        datasets._check_replaceable(str(ours))
    old = tmp_path / "old"
    old.mkdir()
    (old / "dev.jsonl").write_text("{}\n")
    (old / "stats.json").write_text(json.dumps({"dataset": "sentiment"}))
    datasets._check_replaceable(str(old))
    (old / "stats.json").write_text(json.dumps({"dataset": "my own"}))
    with pytest.raises(D.DataError, match=r"\(dev.jsonl, stats.json\)"):
        datasets._check_replaceable(str(old))
    (tmp_path / "empty").mkdir()
    datasets._check_replaceable(str(tmp_path / "empty"))
    with pytest.raises(D.DataError, match="is a file"):
        datasets._check_replaceable(str(mine / "train.conll"))


# ---- 7. one error line where there was a traceback --------------------------------------------
@pytest.mark.slow
def test_missing_training_file(tmp_path):
    line = finetune("tsv.py", tmp_path, f"--config.task.train={tmp_path}/trian.tsv", *RANDOM)
    assert line == f"error: task.train {tmp_path}/trian.tsv does not exist"


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes("text\tlabel\ngood\tpos\ncafé\tneg\n".encode("latin-1"))
    line = finetune("tsv.py", tmp_path, f"--config.task.train={bad}", *RANDOM)
    assert line.startswith(f"error: {bad}:3: not UTF-8")
    for name, text in (("a.conll", "a\tO\n\nb\xe9\tO\n"), ("a.jsonl", '{"text": "\xe9"}\n')):
        (tmp_path / name).write_bytes(text.encode("latin-1"))
        reader = D.read_conll if name.endswith("conll") else D.read_examples
        with pytest.raises(D.DataError, match=f"{name}:{3 if 'conll' in name else 1}: not UTF-8"):
            reader(tmp_path / name)


def test_training_file_without_the_label_column_is_blamed(tmp_path, tsv):
    words = tmp_path / "words.conll"  # tagging: a CoNLL file of words only
    words.write_text("a\nb\n\n")
    config = ml_collections.ConfigDict(
        {"init": "none", "tokenizer": TOKENIZER, "model_from": "albert-base",
         "task": {"type": "tagging", "train": str(words), "max_seq_length": 16}}
    )  # fmt: skip
    with pytest.raises(D.DataError, match=r"task.train .*words.conll: words.conll:1: no tag"):
        F.FinetuneData(config, splits=("train",))
    unlabelled = tmp_path / "train.tsv"  # not blamed on the (labelled) dev file
    unlabelled.write_text("text\ngood room\n")
    line = finetune(
        "tsv.py", tmp_path, f"--config.task.train={unlabelled}", f"--config.task.dev={tsv}",
        *RANDOM,
    )  # fmt: skip
    assert line.startswith(f"error: task.train {unlabelled}: train.tsv:2: no 'label' column")


def slow(*values):
    return pytest.param(*values, marks=pytest.mark.slow)


@pytest.mark.parametrize(
    "flag, message",
    [  # two in the default tier; the rest (a subprocess each, ~5 s) in the slow one
        ("--config.batch_size=0", "error: batch_size must be an integer >= 1, got 0"),
        ("--config.nosuchkey=1", "error: --config.nosuchkey: the config has no such field"),
        slow("--config.seeds=a,b", "error: seeds='a,b': expected integers"),
        slow(
            "--config.task.batch_size=1", "error: --config.task.batch_size: the config has no such"
        ),
        slow("--config.batch_sise=1", 'no such field (Did you mean "batch_size" instead of'),
        slow("--config.batch_size=abc", "error: flag --config.batch_size=abc: invalid literal"),
        slow(
            "--config.optim.learning_rate=-1", "error: optim.learning_rate must be a finite number"
        ),
    ],
)
def test_bad_settings(tmp_path, tsv, flag, message):
    assert message in finetune("tsv.py", tmp_path, f"--config.task.train={tsv}", *RANDOM, flag)


@pytest.mark.slow
def test_pretraining_workdir_that_is_a_file(tmp_path):
    (tmp_path / "run").write_text("my notes\n")
    line = error_line(["albert_jax.pretrain", "--config", CPU_SMALL, "--workdir",
                       str(tmp_path / "run")], tmp_path)  # fmt: skip
    assert line == f"error: --workdir {tmp_path}/run is a file, not a directory"
    assert (tmp_path / "run").read_text() == "my notes\n"


@pytest.mark.slow
def test_a_config_file_that_does_not_exist_is_one_line(tmp_path):
    line = error_line(["pretrain", "--config", "configs/pretrain/cpu_smal.py", "--workdir",
                       str(tmp_path / "run")], ROOT)  # fmt: skip
    assert line == "error: --config configs/pretrain/cpu_smal.py: no such file"
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["pretrain", "finetune", "pretrain.sweep"])
def test_a_config_that_does_not_parse_or_is_a_directory_is_one_line(tmp_path, entry):
    bad = tmp_path / "bad.py"
    bad.write_text("def get_config():\n    return {'a': 1,,}\n")
    work = tmp_path / "run"
    line = error_line([entry, "--config", str(bad), "--workdir", str(work)], ROOT)
    assert line == f"error: {bad}, line 2: invalid syntax"
    line = error_line([entry, "--config", str(tmp_path), "--workdir", str(work)], ROOT)
    assert line.endswith(f"{tmp_path}: is a directory, not a config file")
    assert not work.exists()


def test_a_missing_required_flag_is_one_line_and_exit_status_2(tmp_path):
    # (absl's own UsageError: its help text and exit status 1)
    line = error_line(["pretrain.sweep", "--workdir", str(tmp_path / "sw")], ROOT)
    assert line == "error: --config and --workdir are required"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_workdir_is_one_line(tmp_path):
    work = tmp_path / "run"
    work.mkdir(mode=0o555)
    args = ["albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work)]
    line = error_line(args, tmp_path)
    assert line == f"error: {work}/.lock: Permission denied"
    assert os.listdir(work) == []


def test_a_workdir_that_refuses_the_lock_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    # The read-only test above, where root (CI) writes anyway: the OS refuses the lock's file.
    from absl import flags

    from albert_jax import cli
    from albert_jax.train import lock

    def refused(file, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), file)

    work = tmp_path / "run"
    work.mkdir()
    monkeypatch.setattr(lock, "open", refused, raising=False)  # shadows the builtin there
    if "workdir" not in flags.FLAGS:
        flags.DEFINE_string("workdir", None, "Run directory.")
    monkeypatch.setattr(sys, "argv", ["albert", f"--workdir={work}"])
    with pytest.raises(SystemExit) as exit_:
        cli.run(lambda argv: lock.acquire(str(work)))
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"error: {work}/.lock: Permission denied\n"
    assert os.listdir(work) == []


def test_a_full_disk_is_one_line_and_keeps_the_old_checkpoint(tmp_path, monkeypatch, capsys):
    from absl import flags
    from etils import epath
    from helpers import tiny_config

    from albert_jax import cli
    from albert_jax.checkpoints import checkpoint
    from albert_jax.checkpoints.common import expected_shapes, unflatten

    config = tiny_config()
    rng = np.random.default_rng(0)
    shapes = expected_shapes(config).items()
    params = unflatten({k: rng.standard_normal(s).astype(np.float32) for k, s in shapes})
    path = tmp_path / "model"
    checkpoint.save(path, config, params)

    def full(*args, **kwargs):  # as write() fails: no file name in the error
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(epath.Path, "write_text", full)
    if "workdir" not in flags.FLAGS:  # every entry point has it
        flags.DEFINE_string("workdir", None, "Run directory.")
    monkeypatch.setattr(sys, "argv", ["albert", f"--workdir={tmp_path}"])
    doubled = jax.tree_util.tree_map(lambda x: x * 2, params)
    with pytest.raises(SystemExit) as exit_:
        cli.run(lambda argv: checkpoint.save(path, config, doubled))
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: No space left on device\n"
    assert os.listdir(tmp_path) == ["model"]  # no half-written copy beside it
    monkeypatch.undo()
    saved = checkpoint.load(path)[1]
    jax.tree_util.tree_map(np.testing.assert_array_equal, saved, params)


@pytest.mark.slow
def test_convert_and_predict_exit_as_the_others_do(tmp_path, tsv):
    line = error_line(["albert_jax.convert", str(tmp_path / "none"), str(tmp_path / "out")], ROOT)
    assert line.startswith(f"error: {tmp_path}/none")
    args = ["finetune.predict", "--checkpoint", str(tmp_path / "none"), "--input", str(tsv)]
    assert error_line(args, ROOT).startswith(f"error: {tmp_path}/none")
    assert sorted(os.listdir(tmp_path)) == ["good.tsv"]


@pytest.mark.slow  # three commands (~20 s)
def test_predict_refuses_its_input_as_output_a_missing_input_and_batch_size_0(tmp_path, tsv):
    before = tsv.read_bytes()
    ckpt = ["finetune.predict", "--checkpoint", str(tmp_path / "none")]
    same = str(tmp_path / "." / tsv.name)  # the same file, spelled otherwise
    line = error_line([*ckpt, "--input", str(tsv), "--output", same], ROOT)
    assert line == f"error: --output {same} is the input file: name another one (the input is kept)"
    assert tsv.read_bytes() == before
    line = error_line([*ckpt, "--input", str(tmp_path / "dev.tsv")], ROOT)
    assert line == f"error: --input {tmp_path}/dev.tsv: no such file or directory"
    line = error_line([*ckpt, "--input", str(tsv), "--batch_size", "0"], ROOT)
    assert line == "error: --batch_size must be at least 1, got 0"
    assert sorted(os.listdir(tmp_path)) == ["good.tsv"]


# ---- 8. optimizer settings: refused first thing, before any corpus is built -------------------
@pytest.mark.slow
def test_pretraining_refuses_optimizer_nonsense_before_the_corpus(tmp_path):
    base = ["albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(tmp_path / "run")]
    line = error_line([*base, "--config.optim.warmup_steps=5000"], tmp_path)
    assert line.startswith("error: optim.warmup_steps (5000) must be at most the schedule's")
    line = error_line([*base, "--config.optim.learning_rate=-1"], tmp_path)
    assert line == "error: optim.learning_rate must be a finite number >= 0, got -1.0"
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_pretraining_refuses_sequences_longer_than_the_position_table_before_the_corpus(tmp_path):
    work = tmp_path / "run"
    args = ["albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work),
            "--config.data.max_seq_length=256", "--config.execution.dtype=bfloat16",
            "--config.total_steps=20"]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: data.max_seq_length (256) is longer than the model's position table "
        "(model.max_position_embeddings 128)"
    ), proc.stderr[-3000:]
    assert not work.exists()
    # what it says before: the warmup (100) clamped to the 20 steps; bf16 on a CPU without it
    assert "note: optim.warmup_steps 100 > total_steps 20: warming up over all 20" in proc.stdout
    if not trainer._cpu_has_bf16():
        assert "warning: execution.dtype=bfloat16 on a CPU without native bf16" in proc.stdout


def test_a_short_run_warms_up_over_all_its_steps_unless_the_warmup_is_given(capsys):
    from albert_jax.configs.pretrain.cpu_small import get_config

    config = get_config()
    config.total_steps = 20
    assert pretraining.clamp_warmup(config, given=False) == {"warmup_steps": 20}
    assert "warming up over all 20 steps" in capsys.readouterr().out
    assert config.optim.warmup_steps != 20  # the plan has it; the config stays as given
    plan = Plan.of(config).with_optim(warmup_steps=20)
    optim.OptimConfig.from_config(plan.optim_config(config)).check(20)
    config.optim.warmup_steps = 30
    # the user's own: OptimConfig.check refuses it
    assert pretraining.clamp_warmup(config, given=True) == {} and not capsys.readouterr().out


def test_bfloat16_on_a_cpu_without_it_warns(monkeypatch):
    monkeypatch.setattr(trainer, "_cpu_has_bf16", lambda: False)
    assert "~1.35x slower than float32" in trainer.dtype_warning("bfloat16")
    assert trainer.dtype_warning("float32") is None and trainer.dtype_warning(None) is None
    monkeypatch.setattr(trainer, "_cpu_has_bf16", lambda: True)
    assert trainer.dtype_warning("bfloat16") is None


def test_float16_is_refused_for_training_with_one_line(tmp_path, tsv):
    """No loss scaling: float16 (compute or parameters) is refused before anything is read;
    bfloat16 and float32 (and None: not given) pass."""
    for ok in (None, "float32", "bfloat16"):
        trainer.check_dtype(ok, ok)
    refused = r"^execution.param_dtype=float16 cannot train"
    with pytest.raises(trainer.TrainConfigError, match=refused):
        trainer.check_dtype("float32", "float16")
    line = finetune("tsv.py", tmp_path, f"--config.task.train={tsv}", *RANDOM,
                    "--config.execution.dtype=float16")  # fmt: skip
    assert line == (
        "error: execution.dtype=float16 cannot train: there is no loss scaling, so small "
        "gradients underflow to zero; use bfloat16 (float32's range) or float32 "
        "(--config.execution.dtype=bfloat16)"
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("learning_rate", -1.0, "learning_rate must be a finite number >= 0"),
        ("learning_rate", float("inf"), "learning_rate must be a finite number"),
        ("learning_rate", None, "learning_rate must be a finite number"),
        ("weight_decay", -0.01, "weight_decay must be a finite number >= 0"),
        ("eps", 0.0, "eps must be a finite number > 0"),
        ("b2", 1.0, "b2 must be a finite number >= 0 and < 1"),
        ("clip_norm", -1.0, "clip_norm must be"),
        ("power", -1.0, "power must be"),
        ("name", "sgd", "unknown optimizer 'sgd'"),
        ("warmup_steps", 200, r"warmup_steps \(200\) must be at most .* total_steps \(100\)"),
        ("lr_multipliers", "^classifier/=x", "lr_multipliers='\\^classifier/=x'"),
        ("lr_multipliers", "^classifier/=-2", "multipliers must be >= 0"),
        ("frozen", "encoder/(", "optim.frozen: 'encoder/\\(' is not a regex"),
    ],
)
def test_optim_config_check(field, value, message):
    c = optim.OptimConfig.section()
    c.update(warmup_steps=10, total_steps=100)
    check = lambda *a, **k: optim.OptimConfig.from_config(c).check(*a, **k)
    check(100)
    c[field] = value
    with pytest.raises(optim.OptimConfigError, match=message):
        check(100)


def test_optim_config_check_accepts_what_runs_use():
    c = optim.OptimConfig.section()
    check = lambda *a, **k: optim.OptimConfig.from_config(c).check(*a, **k)
    check(125_000)  # the paper's
    c.update(learning_rate=0.0, clip_norm=None, weight_decay=0.0)  # a frozen control run
    check(None)  # total steps from the epochs / FLOPs budget, later
    c.update(learning_rate=None, lr_multipliers=None)  # fine-tuning's auto
    check(None, auto=True)
    with pytest.raises(optim.OptimConfigError):
        check(None)


# ---- issue 39: inputs from the wild ---------------------------------------------------------
@pytest.fixture
def broken_spiece(tmp_path):
    """Our checkpoint (hf_gelu_new's weights) whose tokenizer/spiece.model is cut: (path, file)."""
    from albert_jax.checkpoints import checkpoint
    from albert_jax.checkpoints.source import load_source

    source = load_source(os.path.join(ROOT, "tests", "fixtures", "hf_gelu_new"))
    ckpt = tmp_path / "ckpt"
    checkpoint.save(ckpt, source.config, source.params, tokenizer=source.tokenizer)
    return ckpt, ckpt / "tokenizer" / "spiece.model"


@pytest.mark.parametrize("keep", [0, 300], ids=["empty", "truncated"])
def test_a_broken_spiece_model_is_named(broken_spiece, keep):
    from albert_jax.text.tokenization import TokenizerError, load_tokenizer

    ckpt, spiece = broken_spiece
    spiece.write_bytes(spiece.read_bytes()[:keep])
    message = f"{spiece} is not a valid SentencePiece model ({keep} bytes)"
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(spiece.parent)
    assert str(info.value) == message


@pytest.mark.slow
def test_convert_and_finetune_name_a_broken_spiece_model(broken_spiece, tsv, tmp_path):
    ckpt, spiece = broken_spiece
    spiece.write_bytes(b"")
    before = tree(tmp_path)
    want = f"error: {spiece} is not a valid SentencePiece model (0 bytes)"
    assert error_line(["albert_jax.convert", str(ckpt), str(tmp_path / "out")], ROOT) == want
    spiece.write_bytes(b"")
    line = finetune("tsv.py", tmp_path, f"--config.task.train={tsv}", f"--config.init={ckpt}")
    assert line == want
    assert tree(tmp_path) == before  # nothing written


# ---- issue 39: fine-tuning inputs that trained on nonsense or ended in a traceback -------------
@pytest.mark.slow
def test_a_prepared_dataset_is_never_built_again(tmp_path, monkeypatch):
    """A near-miss of its file name (train.conl) in the dataset's own place: the dataset there
    (dev.conll edited by hand) stays as it is, and the missing file is named."""
    from albert_jax.configs.finetune import ner

    home = tmp_path / "data" / "finetune" / "ner"
    home.mkdir(parents=True)
    files = ["dev.conll", "test.conll", "train.conll"]
    for name in files:
        (home / name).write_text("Paris\tB-LOC\nis\tO\n\n")
    (home / datasets.MARKER).write_text(json.dumps({"dataset": "ner", "files": files}))
    (home / "dev.conll").write_text("my\tO\nedit\tO\n\n")  # by hand: ours no more
    before = hashes(home)
    line = finetune("ner.py", tmp_path, "--config.task.train=data/finetune/ner/train.conl", *RANDOM)
    assert line.startswith(
        "error: task.train data/finetune/ner/train.conl does not exist (data/finetune/ner exists "
        "and is not built again over its files"
    )
    assert hashes(home) == before
    monkeypatch.chdir(tmp_path)
    config = ner.get_config()
    assert start.dataset_to_build(config) == ""  # even with every name right: it is there
    (tmp_path / "fresh").mkdir()
    monkeypatch.chdir(tmp_path / "fresh")
    assert start.dataset_to_build(config) == "ner"
    config.task.train = "data/finetune/ner/train.conl"  # not its own file: never built for it
    assert start.dataset_to_build(config) == ""


def tsv_config(**settings):
    from albert_jax.configs.finetune import tsv

    config = tsv.get_config()
    config.update(settings)
    return config


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"max_train_examples": -5}, "max_train_examples must be an integer >= 0, got -5"),
        ({"eval_every": -1}, "eval_every must be an integer >= 0, got -1"),
        ({"log_every": 0}, "log_every must be an integer >= 1, got 0"),
        ({"checkpoint_every": -1}, "checkpoint_every must be an integer >= 0, got -1"),
        ({"best_metric": "f2"}, "best_metric: metric 'f2' is not computed for classification "
         "tasks; choose one of \\['accuracy', 'macro_f1', 'mcc', 'f1'\\]"),
        ({"best_metric": "f1"}, r"best_metric: 'f1' \(one class's F1\) needs task.positive"),
        ({"task.max_seq_length": 2}, r"task.max_seq_length must be an integer >= 3 \(\[CLS\] "),
        ({"fresh_params": "^classifier/("}, r"fresh_params: '\^classifier/\(' is not a regex"),
        ({"task.type": "tagging", "task.scheme": "IOB"},
         r"task.scheme must be one of \('BIO', 'BMES'\), got 'IOB'"),
    ],
)  # fmt: skip
def test_settings_refused_before_anything_is_read(settings, message):
    config = tsv_config()
    F.check_config(config)  # the defaults: 0 is documented as once per epoch / at every eval
    for key, value in settings.items():
        parent, _, field = key.rpartition(".")
        (config[parent] if parent else config)[field] = value
    with pytest.raises(F.FinetuneError, match=message):
        F.check_config(config)


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--config.optim.lr_multipliers=^classifer/=10",
         "error: optim.lr_multipliers: '^classifer/' matches no parameter (the top-level groups: "
         "classifier, "),
        slow("--config.optim.frozen=^embedings/",
             "error: optim.frozen: '^embedings/' matches no parameter"),
    ],
)  # fmt: skip
def test_a_regex_that_matches_no_parameter(tmp_path, tsv, flag, message):
    assert finetune("tsv.py", tmp_path, f"--config.task.train={tsv}", *RANDOM, flag).startswith(
        message
    )


@pytest.mark.parametrize(
    "name, text",
    [("header.tsv", "text\tlabel\n"), slow("empty.jsonl", "\n")],
)
def test_a_training_file_without_examples(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    line = finetune("tsv.py", tmp_path, f"--config.task.train={tmp_path / name}", *RANDOM)
    assert line == f"error: task.train {tmp_path / name}: no examples"


@pytest.mark.slow
def test_a_training_file_with_one_class(tmp_path):
    one = tmp_path / "one.tsv"
    one.write_text("text\tlabel\ngood room\tpos\nnice room\tpos\n")
    line = finetune("tsv.py", tmp_path, f"--config.task.train={one}", *RANDOM)
    assert line == (
        f"error: task.train {one}: 1 label(s) ['pos']: classification needs at least 2 labels "
        "to tell apart"
    )


def test_a_tag_outside_the_scheme_is_refused_where_it_is_read(tmp_path):
    conll = tmp_path / "tags.conll"
    conll.write_text("-DOCSTART-\n\nParis\tB-LOC\nis\tO\n\nACME\tS-ORG\nsells\tO\n\n")
    with pytest.raises(D.DataError, match=rf"{conll}:6: tag 'S-ORG' is not a BIO tag"):
        tagging.Reader(TaggingSettings(scheme="BIO")).read(conll)
    assert len(tagging.Reader(TaggingSettings(scheme="BMES")).read(conll)[0]) == 2
    jsonl = tmp_path / "tags.jsonl"
    jsonl.write_text('{"words": ["a"], "tags": ["O"]}\n{"words": ["b", "c"], "tags": ["O", "X"]}\n')
    with pytest.raises(D.DataError, match=rf"{jsonl}:2: tag 'X' is not a BIO tag"):
        tagging.Reader(TaggingSettings(scheme="BIO")).read(jsonl)


def test_regression_labels_must_fit_the_loss(tmp_path):
    big = tmp_path / "big.tsv"
    big.write_text("text\tlabel\na\t1.5\nb\t1e30\n")
    with pytest.raises(D.DataError, match="big.tsv:3: regression label '1e30' is too large"):
        D.read_examples(big, task_type="regression")
    for value in ("inf", "nan", "-1e999"):
        big.write_text(f"text\tlabel\na\t{value}\n")
        with pytest.raises(D.DataError, match="big.tsv:2: regression label .* not a finite"):
            D.read_examples(big, task_type="regression")
    big.write_text("text\tlabel\na\t-1e16\nb\t1e16\n")  # large, but its loss is finite
    assert [e.label for e in D.read_examples(big, task_type="regression")] == [-1e16, 1e16]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("lr_multipliers", "^encodr/=2", "optim.lr_multipliers: '^encodr/' matches no parameter"),
        ("frozen", "^embedings/", "optim.frozen: '^embedings/' matches no parameter"),
    ],
)
def test_a_pretraining_regex_that_matches_no_parameter(tmp_path, field, value, message):
    # The trainer checks every task's patterns (fine-tuning also checks them before its search).
    from trainer_worker import make_config, make_task

    from albert_jax.train.optim import OptimConfigError
    from albert_jax.train.trainer import train

    config = make_config(**{f"optim.{field}": value})
    with pytest.raises(OptimConfigError, match=re.escape(message) + r" \(the top-level groups: "):
        train(config, str(tmp_path / "run"), make_task(config).job())
    assert not (tmp_path / "run" / "checkpoints").exists()

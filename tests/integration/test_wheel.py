"""The wheel as a user installs it: built from this checkout, installed into a fresh venv (the
lock's versions), run from a directory outside the checkout. Its top level holds `albert_jax`
alone; `albert-finetune --help` and a tiny fine-tune from a shipped config by name work there."""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys

import pytest
from support import ROOT

pytestmark = pytest.mark.slow


def uv() -> list[str]:
    """uv, which CI installs before anything (.ci/run); on PATH or as a module."""
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def sh(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv holding the wheel and its dependencies at the lock's versions."""
    tmp = tmp_path_factory.mktemp("wheel")
    # the sdist, then the wheel from it (as a registry builds): no stale build/ of the checkout
    sh([*uv(), "build", "--out-dir", str(tmp / "dist"), ROOT], cwd=ROOT)
    (wheel,) = glob.glob(str(tmp / "dist" / "albert_jax-*.whl"))
    pins = sh(
        [*uv(), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"], cwd=ROOT
    )
    (tmp / "pins.txt").write_text(pins.stdout)
    sh([*uv(), "venv", "--python", sys.executable, str(tmp / "venv")])
    python = str(tmp / "venv" / "bin" / "python")
    sh([*uv(), "pip", "install", "--python", python, "-c", str(tmp / "pins.txt"), wheel])
    return tmp / "venv"


def test_wheel_top_level_is_albert_jax_alone(venv):
    """The installed files (the wheel's RECORD) are albert_jax, its dist-info and the scripts;
    `configs`, `pretrain` and `finetune` import from nowhere outside the checkout."""
    python = str(venv / "bin" / "python")
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps(sorted({str(f).split('/')[0] for f in m.files('albert-jax')})))"
    )
    top = json.loads(sh([python, "-c", code], cwd=venv).stdout)
    assert [t for t in top if not t.startswith(("albert_jax", ".."))] == [], top
    assert "albert_jax" in top and any(t.endswith(".dist-info") for t in top)
    for name in ("configs", "pretrain", "finetune"):
        proc = subprocess.run([python, "-c", f"import {name}"], cwd=venv, capture_output=True)
        assert proc.returncode != 0, name
    scripts = {p.name for p in (venv / "bin").glob("albert-*")}
    assert {"albert-pretrain", "albert-finetune", "albert-convert"} <= scripts


def test_wheel_runs_a_shipped_config_by_name(venv, pretrained, files, tmp_path):
    """`albert-finetune --help` (the command's docstring and flags), then a tiny fine-tune from
    `tsv.py` (the shipped config, by name) in a directory outside the checkout; its provenance
    names the wheel's version and no commit (there is no checkout)."""
    bin_ = venv / "bin"
    help_ = subprocess.run(
        [str(bin_ / "albert-finetune"), "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert help_.returncode == 1, help_.stderr[-2000:]  # absl's --help exits 1
    assert help_.stdout.startswith("Fine-tuning: `python -m finetune --config")  # the docstring
    assert "  --config: Config file." in help_.stdout and "  --workdir: " in help_.stdout
    work = tmp_path / "run"
    cmd = [
        str(bin_ / "albert-finetune"), "--config", "tsv.py", "--workdir", str(work),
        f"--config.init={pretrained}", f"--config.task.train={files}/cls_train.jsonl",
        f"--config.task.dev={files}/cls_dev.jsonl", "--config.task.max_seq_length=16",
        "--config.batch_size=8", "--config.eval_batch_size=8", "--config.total_steps=2",
        "--config.progress_bar=False", "--config.lr_search.enabled=False",
    ]  # fmt: skip
    sh(cmd, cwd=tmp_path)
    summary = json.loads((work / "summary.json").read_text())
    assert 0.0 <= summary["dev"]["accuracy"]["mean"] <= 1.0
    record = json.loads((work / "provenance.jsonl").read_text().splitlines()[0])
    assert record["commit"] is None and record["versions"]["albert-jax"] == "0.1.0"
    # a name found nowhere: one line naming what was typed
    bad = subprocess.run(
        [str(bin_ / "albert-finetune"), "--config", "nope.py", "--workdir", str(tmp_path / "x")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.strip().endswith("--config nope.py: no such file")

"""Provenance (issue 57): what made a run or a model, recorded once per start in the workdir and
in every model directory a checkpoint save writes."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import jax
import pytest
from helpers import random_params, tiny_config
from support.trainer import run

from albert_jax import provenance
from albert_jax.checkpoints import checkpoint
from albert_jax.model.albert import AlbertForPreTraining

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args, cwd=ROOT):
    return subprocess.run(("git", *args), cwd=cwd, capture_output=True, text=True).stdout.strip()


def _check_record(record, mesh=None):
    """A record as `collect` makes it in this process: the checkout's commit and state, the
    installed versions, this process's devices and command."""
    assert record["commit"] == _git("rev-parse", "HEAD")
    assert record["dirty"] == bool(_git("status", "--porcelain", "--untracked-files=no"))
    v = record["versions"]
    assert v["jax"] == jax.__version__ and v["jaxlib"] == importlib.metadata.version("jaxlib")
    for name in ("flax", "optax", "orbax-checkpoint", "grain"):
        assert v[name] == importlib.metadata.version(name), name
    assert record["backend"] == jax.default_backend()
    assert record["device_count"] == jax.device_count()
    assert record["process_count"] == jax.process_count() == 1
    assert record["command"] == list(sys.orig_argv)
    assert record.get("mesh") == mesh


def test_a_run_records_each_start_with_its_mesh(tmp_path):
    run(tmp_path, total_steps=2)
    run(tmp_path, total_steps=4)  # resumed: a second start, a second record
    lines = (tmp_path / "provenance.jsonl").read_text().splitlines()
    assert len(lines) == 2
    mesh = {"data": jax.device_count(), "fsdp": 1, "tensor": 1}
    for line in lines:
        _check_record(json.loads(line), mesh)


def test_a_saved_model_carries_its_provenance(tmp_path):
    config = tiny_config("all", vocab_size=97)
    checkpoint.save(tmp_path / "m", config, random_params(AlbertForPreTraining(config)))
    _check_record(json.loads((tmp_path / "m" / provenance.FILE).read_text()))
    checkpoint.load(tmp_path / "m")  # the extra file does not disturb loading


def test_source_tree_reads_commit_and_uncommitted_changes(tmp_path):
    assert provenance.source_tree(str(tmp_path)) == {"commit": None, "dirty": None}  # a wheel
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (("init", "-q"), ("config", "user.email", "t@t"), ("config", "user.name", "t")):
        _git(*args, cwd=repo)
    (repo / "f.py").write_text("a = 1\n")
    _git("add", "f.py", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    clean = provenance.source_tree(str(repo))
    assert clean == {"commit": _git("rev-parse", "HEAD", cwd=repo), "dirty": False}
    (repo / "untracked.txt").write_text("not code\n")
    assert provenance.source_tree(str(repo))["dirty"] is False  # untracked files are not edits
    (repo / "f.py").write_text("a = 2\n")
    assert provenance.source_tree(str(repo)) == {"commit": clean["commit"], "dirty": True}


@pytest.mark.parametrize("name", ["jax", "flax"])
def test_versions_name_the_installed_distributions(name):
    assert provenance.versions()[name] == importlib.metadata.version(name)
    assert "not-a-package" not in provenance.versions()

"""The packaging contract (issue 56): the commands live in albert_jax (pretrain/ and finetune/ in a
checkout only forward `python -m` to them), every console script names an entry function that
exists, and `--config` finds the shipped configs by name from any directory. The wheel itself,
built and installed into a fresh venv: tests/integration/test_wheel.py (slow)."""

from __future__ import annotations

import ast
import os
import tomllib

import pytest
from support import ROOT

from albert_jax import cli, paths

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    PYPROJECT = tomllib.load(f)
SCRIPTS = PYPROJECT["project"]["scripts"]
SHIPPED = os.path.join(ROOT, "albert_jax", "configs")


def test_wheel_packages_albert_jax_alone():
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["albert_jax*"]
    assert os.path.realpath(os.path.join(ROOT, "configs")) == SHIPPED  # the checkout's link


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_console_script_entry_exists(script):
    """Each script is albert-JOB[-MODULE] for albert_jax.JOB.MODULE (underscores as hyphens)
    and names a function of its module that takes no arguments."""
    module, _, function = SCRIPTS[script].partition(":")
    parts = module.split(".")
    if script != "albert-convert":
        job, name = parts[1], parts[2]
        want = f"albert-{job}" if name == "__main__" else f"albert-{job}-{name.replace('_', '-')}"
        assert script == want
    # read, not imported: the commands define absl flags, which one process takes once
    with open(os.path.join(ROOT, *parts) + ".py") as f:
        defs = {n.name: n for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}
    assert function in defs and not defs[function].args.args


def test_every_command_module_has_a_script_and_a_checkout_forward():
    """Every module of albert_jax.pretrain / .finetune with an entry has its console script and
    its `python -m pretrain[.MODULE]` file in the checkout, which runs that module's entry."""
    targets = {v.partition(":")[0] for v in SCRIPTS.values()}
    for job in ("pretrain", "finetune"):
        for name in sorted(os.listdir(os.path.join(ROOT, "albert_jax", job))):
            if not name.endswith(".py") or name == "__init__.py":
                continue
            module = f"albert_jax.{job}.{name[:-3]}"
            assert module in targets, module
            with open(os.path.join(ROOT, job, name)) as f:
                tree = ast.parse(f.read())
            imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert [(n.module, [a.name for a in n.names]) for n in imports] == [(module, ["entry"])]


@pytest.mark.parametrize(
    "typed, shipped",
    [
        ("configs/finetune/glue.py:rte", "finetune/glue.py:rte"),
        ("finetune/glue.py:rte", "finetune/glue.py:rte"),
        ("glue.py:rte", "finetune/glue.py:rte"),
        ("glue:rte", "finetune/glue.py:rte"),
        ("cpu_small.py", "pretrain/cpu_small.py"),
        ("configs/sweeps/tiny.py", "sweeps/tiny.py"),
        ("tiny", "sweeps/tiny.py"),
    ],
)
def test_config_found_by_name_from_any_directory(tmp_path, monkeypatch, typed, shipped):
    monkeypatch.chdir(tmp_path)
    assert paths.config_file(typed) == os.path.join(SHIPPED, shipped)
    assert cli._shipped_configs(["x", "--config", typed, "--workdir", "w"])[2] == os.path.join(
        SHIPPED, shipped
    )
    assert cli._shipped_configs(["x", f"--config={typed}"]) == [
        "x",
        "--config=" + os.path.join(SHIPPED, shipped),
    ]


def test_config_of_ones_own_wins_and_unknown_is_left_as_typed(tmp_path, monkeypatch):
    """A file that exists is taken as given (a user's own `glue.py` here), and a name found
    nowhere, or in two places (common.py), is left as typed for the error to name it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "glue.py").write_text("def get_config(arg): ...\n")
    assert paths.config_file("glue.py:rte") == "glue.py:rte"
    for typed in ("nope.py", "configs/finetune/nope.py:x", "common.py", "gs://b/c.py", ""):
        assert paths.config_file(typed) == typed
    assert paths.config_file(str(tmp_path)) == str(tmp_path)  # a directory: the caller's error

"""The library's layers (.importlinter): `lint-imports` in .ci/run checks that this tree keeps
them; here, that the contracts can fail: an upward import or an import cycle planted in a copy
of the package breaks them."""

import os
import re
import shutil
import subprocess
import sys

import albert_jax

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def lint(cwd):
    # import-linter puts the working directory first on sys.path: a copy there shadows the repo.
    return subprocess.run(
        [LINT, os.path.join(ROOT, ".importlinter"), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def plant(tmp_path, module, line):
    """A copy of the package with `line` appended to `module` (a path under albert_jax/)."""
    shutil.copytree(
        os.path.join(ROOT, "albert_jax"),
        tmp_path / "albert_jax",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    path = tmp_path / "albert_jax" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")


def test_an_upward_import_breaks_the_contract(tmp_path):
    plant(tmp_path, "model/losses.py", "from albert_jax.train import trainer")  # the model layer
    r = lint(tmp_path)  # ... importing the trainer, two layers up
    assert r.returncode == 1, r.stdout + r.stderr
    assert "albert_jax.model is not allowed to import albert_jax.train" in r.stdout
    assert "albert_jax.model.losses -> albert_jax.train.trainer" in r.stdout


def test_an_import_cycle_inside_a_layer_breaks_the_contract(tmp_path):
    # data.pretraining.masking is imported by its pipeline; importing pipeline back closes a cycle.
    plant(
        tmp_path, "data/pretraining/masking.py", "from albert_jax.data.pretraining import pipeline"
    )
    r = lint(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No import cycle among the modules of any package BROKEN" in r.stdout
    assert "- .pipeline -> .masking" in r.stdout  # import-linter names the dependency to drop


def test_the_public_api_still_resolves():
    """Every name `albert_jax` exports (docs/api.md imports them) resolves through the lazy export
    table to the object of that name in its new layer."""
    api = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    documented = set(re.findall(r"\w+", re.search(r"from albert_jax import \(([^)]*)\)", api)[1]))
    assert documented <= set(albert_jax.__all__), documented - set(albert_jax.__all__)
    for name in albert_jax.__all__:
        assert getattr(albert_jax, name).__name__.rsplit(".", 1)[-1] == name, name

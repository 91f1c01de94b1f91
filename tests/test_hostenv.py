"""The entry points' huge-page malloc: set once by re-executing, never looping, opt-out works, and
peers get the user's own environment back."""

import ast
import os
import subprocess
import sys

import pytest

from albert_jax import hostenv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = (
    "import os, sys\n"
    "from albert_jax.hostenv import use_huge_pages\n"
    "print('start', sys.argv[1:], flush=True)\n"
    "use_huge_pages()\n"
    "print('tunables', os.environ.get('GLIBC_TUNABLES'), os.environ.get('KEEP'))\n"
)
supported = pytest.mark.skipif(
    not hostenv.wanted({}), reason="needs Linux with glibc >= 2.35 (the tunable's first release)"
)


def run_child(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", hostenv.OPT_OUT)}
    env |= {"PYTHONPATH": ROOT, "KEEP": "kept", **extra}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "a b", "--flag=1"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


START = "start ['a b', '--flag=1']"


@supported
def test_reexecutes_once_with_the_tunable_and_the_same_arguments():
    # Started twice (the re-exec) with the same arguments and environment; no third start.
    assert run_child(GLIBC_TUNABLES="glibc.a=1") == [
        START,
        START,
        f"tunables glibc.a=1:{hostenv.TUNABLE} kept",
    ]


@supported
def test_opt_out_and_an_existing_setting_are_respected():
    assert run_child(**{hostenv.OPT_OUT: "1"}) == [START, "tunables None kept"]
    mine = "glibc.malloc.hugetlb=0"
    assert run_child(GLIBC_TUNABLES=mine) == [START, f"tunables {mine} kept"]


def test_peers_get_the_users_environment_back():
    for user in ({}, {"GLIBC_TUNABLES": "glibc.a=1", "X": "y"}):
        ours = hostenv.with_tunable(user)
        assert hostenv.TUNABLE in ours["GLIBC_TUNABLES"].split(":")
        assert hostenv.without_added(ours) == user
    # Set by the user themselves: kept for the peer too.
    user = {"GLIBC_TUNABLES": hostenv.TUNABLE}
    assert not hostenv.wanted(user) and hostenv.without_added(user) == user


@pytest.mark.parametrize("path", ["pretrain/__main__.py", "finetune/__main__.py"])
def test_entry_points_set_it_before_importing_anything_else(path):
    body = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read()).body
    call = next(i for i, s in enumerate(body) if isinstance(s, ast.Expr | ast.Assign) and i > 0)
    assert ast.unparse(body[call]) == "use_huge_pages()"
    imports = [ast.unparse(s) for s in body[:call] if isinstance(s, ast.Import | ast.ImportFrom)]
    assert imports == [
        "from __future__ import annotations",
        "from albert_jax.hostenv import use_huge_pages",
    ]

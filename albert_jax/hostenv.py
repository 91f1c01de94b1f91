"""Host settings that must be in place before the process starts (no JAX import here).

glibc's malloc serves every large block with its own mmap and unmaps it on free, so an XLA CPU
step page-faults its temporary buffers anew each time, 4 KiB at a time: on a 2-core machine the
ALBERT-base f32 step spends ~15 % of its time there (docs/performance.md). The tunable
`glibc.malloc.hugetlb=1` (glibc >= 2.35) has malloc ask for transparent huge pages, 512x fewer
faults. Tunables are read when the process starts, so the entry points re-execute themselves with
it set (`use_huge_pages`); set ALBERT_JAX_KEEP_MALLOC=1 to opt out. With the Python API, export
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 before starting Python.
"""

from __future__ import annotations

import os
import platform
import sys

TUNABLE = "glibc.malloc.hugetlb=1"
OPT_OUT = "ALBERT_JAX_KEEP_MALLOC"
ADDED = "ALBERT_JAX_ADDED_TUNABLE"  # marks a process re-executed by us (peers run without it)


def wanted(environ=os.environ) -> bool:
    """On Linux with glibc >= 2.35, unless opted out or already set (also: no re-exec loop)."""
    if (
        sys.platform != "linux"
        or environ.get(OPT_OUT)
        or "glibc.malloc.hugetlb" in environ.get("GLIBC_TUNABLES", "")
    ):
        return False
    libc, version = platform.libc_ver()
    try:
        return libc == "glibc" and tuple(map(int, version.split(".")[:2])) >= (2, 35)
    except ValueError:
        return False


def with_tunable(environ=os.environ) -> dict[str, str]:
    """`environ` with TUNABLE appended to GLIBC_TUNABLES."""
    tunables = ":".join(t for t in (environ.get("GLIBC_TUNABLES", ""), TUNABLE) if t)
    return dict(environ, GLIBC_TUNABLES=tunables, **{ADDED: "1"})


def without_added(environ=os.environ) -> dict[str, str]:
    """The environment the user started us with: for peers, which run as their users run them."""
    env = dict(environ)
    if env.pop(ADDED, None):
        rest = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t and t != TUNABLE]
        env["GLIBC_TUNABLES"] = ":".join(rest)
        if not rest:
            del env["GLIBC_TUNABLES"]
    return env


def use_huge_pages() -> None:
    """Re-execute this process (same interpreter, same command line) with TUNABLE set, once.
    Call it first thing in an entry point: nothing done before it survives."""
    if not wanted():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, with_tunable())

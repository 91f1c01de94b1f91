"""The entry points' wrapper: host memory that XLA's CPU runtime frees is kept for the next step
(measured in a fresh process: tests/integration/test_fresh_process.py), unless asked not to."""

from __future__ import annotations

from albert_jax import cli


def test_the_allocator_is_left_alone_when_asked(monkeypatch):
    monkeypatch.setenv(cli.MALLOC_ENV, "system")
    assert cli.keep_freed_memory() is False

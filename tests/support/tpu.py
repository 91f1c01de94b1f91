"""The skip of the tests that compile for a TPU topology on this host."""

import importlib.util

import pytest

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason="libtpu is not installed (uv sync --extra tpu; .ci/run installs it)",
)

"""Test-wide setup: 8 fake CPU devices for the sharding tests (set before jax is imported), and
the tiny model shape tasks are built on (`model_from`)."""

import os

import pytest

# The tests are dominated by XLA compile time of tiny models; LLVM optimization level 0 halves it.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")


@pytest.fixture(scope="session")
def model_from(tmp_path_factory):
    """A tiny model shape (config.json) for `FinetuneTask.from_config` (`config.model_from`):
    the tokenizer's vocabulary replaces its own."""
    from test_finetune import tiny_config

    path = tmp_path_factory.mktemp("shape") / "config.json"
    path.write_text(tiny_config().to_json())
    return str(path)

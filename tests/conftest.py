"""Test-wide setup: 8 fake CPU devices for the sharding tests (set before jax is imported)."""

import os

# The tests are dominated by XLA compile time of tiny models; LLVM optimization level 0 halves it.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

"""Helpers shared by several test modules (no tests here: pytest collects only test_*.py).

Test modules never import one another: shared fixtures live in tests/conftest.py (pytest finds
them without an import) and the plain functions and constants they and the tests use live here,
one module per topic."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

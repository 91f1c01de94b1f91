"""Typed config sections: a frozen dataclass of leaves with their defaults, the one place each
default lives (`TrainerConfig`, `FinetuneConfig`, `PretrainConfig`, `DataConfig`).

A job's config is an ml_collections file built from the sections' `section()` (so every leaf
exists and parses on the command line); the library reads a section back with `from_config`.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import ml_collections
from ml_collections import config_dict


class Section:
    """Mixed into a frozen dataclass; a field whose default is a `Section` is a nested one."""

    @classmethod
    def section(cls) -> ml_collections.ConfigDict:
        """The defaults as config leaves (what a job's config starts from). A leaf whose default
        is None (`x: float | None = None`) is a typed placeholder, so `--config.x=0.1` parses."""
        leaves = dataclasses.asdict(cls())
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.default is None:
                kind = next(t for t in typing.get_args(hints[f.name]) if t is not type(None))
                leaves[f.name] = config_dict.placeholder(kind)
        return ml_collections.ConfigDict(leaves)

    @classmethod
    def from_config(cls, config: Any):
        """This section's leaves of a config (a ConfigDict or a dict): leaves it lacks take the
        defaults, leaves of other sections are not read."""
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in config:
                value = config[f.name]
                if isinstance(f.default, Section):
                    value = type(f.default).from_config(value or {})
                values[f.name] = value
        return cls(**values)

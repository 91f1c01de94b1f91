"""The command-line entry points' shared wrapper: the project's input errors (a bad file, field
or value; every one is a ValueError subclass whose message names what is wrong) end the program
with that one line and exit status 2, not a traceback. Anything else still shows its traceback.
It also sets the host allocator up for XLA's CPU runtime (`keep_freed_memory`)."""

from __future__ import annotations

import ctypes
import os
import sys

from absl import app


def _input_errors() -> tuple[type[Exception], ...]:
    from albert_jax.checkpoint import CheckpointError
    from albert_jax.convert.errors import ConversionError
    from albert_jax.data.corpus import CorpusError
    from albert_jax.data.pipeline import DataConfigError
    from albert_jax.tasks.data import DataError
    from albert_jax.tasks.finetuning import FinetuneError
    from albert_jax.tokenization import TokenizerError
    from albert_jax.train.pretraining import ObjectiveError
    from albert_jax.train.trainer import TrainConfigError

    return (
        CheckpointError,
        ConversionError,
        CorpusError,
        DataConfigError,
        DataError,
        FinetuneError,
        ObjectiveError,
        TokenizerError,
        TrainConfigError,
    )


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
MALLOC_ENV = "ALBERT_JAX_MALLOC"  # "system": leave the allocator as it is


def keep_freed_memory() -> bool:
    """Make glibc keep freed host memory for reuse instead of returning it to the kernel.

    XLA's CPU runtime allocates a step's temporaries (1.2 GB for an ALBERT-base train step) anew
    at every call. glibc serves blocks that large with mmap, and XLA's worker threads allocate
    from their own arenas, which must mmap them; free then unmaps them. So every step faults its
    temporaries in again, one zeroed 4 KB page at a time (87,500 faults and ~0.07 s of the 0.23 s
    optimizer update of base not shared, docs/performance.md). One arena, no mmap and no trimming
    below 2 GB keep those pages mapped: the next step reuses them. The cost: the process keeps its
    peak host memory until it exits, and that peak is higher (1.01 against 0.84 GB for the
    README's pretraining run). Linux/glibc only; call it before JAX starts its threads (before the
    first computation). `ALBERT_JAX_MALLOC=system` turns it off. True if applied."""
    if os.environ.get(MALLOC_ENV, "") == "system" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1))
    return all(mallopt(option, value) == 1 for option, value in settings)


def run(main) -> None:
    """`absl.app.run(main)` with input errors reported as `error: MESSAGE` (exit status 2), after
    `keep_freed_memory()`."""
    keep_freed_memory()

    def wrapped(argv):
        try:
            return main(argv)
        except _input_errors() as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            sys.exit(2)

    app.run(wrapped)

"""The command-line entry points' shared wrapper: the project's input errors (a bad file, field
or value; every one subclasses `albert_jax.errors.InputError`, a ValueError whose message names
what is wrong) end the program with that one line and exit status 2, not a traceback. Anything
else still shows its traceback. Flag errors (a bad value, an unknown `--config.FIELD`) read the
same. It also sets the host allocator up for XLA's CPU runtime (`keep_freed_memory`)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys

from absl import app, flags

from albert_jax import paths
from albert_jax.errors import InputError  # also raised here for an entry point's own arguments

INPUT_ERROR = 2  # the exit status of every input error


def check_workdir(workdir: str) -> None:
    """A workdir must be a directory or not exist yet (it is created later)."""
    if "://" not in workdir and os.path.exists(workdir) and not os.path.isdir(workdir):
        raise InputError(f"--workdir {workdir} is a file, not a directory")


@contextlib.contextmanager
def removed_on_input_error(workdir: str):
    """A workdir created inside the block is removed again if the block ends on an input error
    while it holds nothing but train.log (the log of a run that never started)."""
    fresh = "://" not in workdir and not os.path.exists(workdir)
    try:
        yield
    except InputError:
        if fresh and os.path.isdir(workdir) and os.listdir(workdir) in ([], ["train.log"]):
            shutil.rmtree(workdir)
        raise


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


def report(error: BaseException) -> int:
    """Prints `error: MESSAGE` and returns the input errors' exit status (the argparse entry
    points return it from `main`)."""
    print(f"error: {error}", file=sys.stderr, flush=True)
    return INPUT_ERROR


def _override(error: BaseException) -> str | None:
    """`--config.FIELD` whose override ml_collections failed to apply, from the traceback (its
    error names only the last key, without the flag)."""
    found, tb = None, error.__traceback__
    while tb is not None:
        names = tb.tb_frame.f_locals
        if "field_path" in names and isinstance(names.get("self"), flags.Flag):
            found = f"--{names['self'].name}.{names['field_path']}"
        tb = tb.tb_next
    return found


def syntax_error(error: SyntaxError) -> InputError:
    """A config file that does not parse, as one line naming its file and line."""
    return InputError(f"{error.filename}, line {error.lineno}: {error.msg}")


def _check_config_files() -> None:
    """A `--config FILE` that does not exist or is a directory, as one line (ml_collections
    defers the failed load to the first use of the config, as a chained traceback)."""
    from ml_collections import config_flags

    for name in flags.FLAGS:
        flag = flags.FLAGS[name]
        if not flag.present or not hasattr(flag, "config_filename"):
            continue
        path = config_flags.get_config_filename(flag).split(":", 1)[0]
        if not os.path.exists(path):
            sys.exit(report(InputError(f"--{name} {path}: no such file")))
        if os.path.isdir(path):
            sys.exit(report(InputError(f"--{name} {path}: is a directory, not a config file")))


def _shipped_configs(argv: list[str]) -> list[str]:
    """`--config NAME` / `--config=NAME` found among the shipped configs when NAME is not a file
    here (`paths.config_file`): an installed wheel runs `albert-finetune --config glue.py:rte`."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg.startswith("--config="):
            out[i] = "--config=" + paths.config_file(arg.split("=", 1)[1])
        elif arg == "--config" and i + 1 < len(out):
            out[i + 1] = paths.config_file(out[i + 1])
    return out


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing with its errors as input errors: a bad flag value (absl prints a
    FATAL line and exits 1) or an unknown config field (a bare AttributeError traceback)."""
    try:
        argv = flags.FLAGS(_shipped_configs(argv))
        _check_config_files()
        return argv
    except SyntaxError as e:  # a config file's, raised while ml_collections loads it
        sys.exit(report(syntax_error(e)))
    except flags.Error as e:  # its first line names the flag, its last says what is wrong
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        sys.exit(report(InputError(": ".join(dict.fromkeys([lines[0], lines[-1]])))))
    except (AttributeError, KeyError, TypeError) as e:
        name = _override(e)
        if name is None:  # not an override: a bug, keep its traceback
            raise
        if isinstance(e, TypeError):  # e.g. --config.task.train.x: train is a string
            sys.exit(report(InputError(f"{name}: cannot be set ({e})")))
        while isinstance(e, Exception) and e.args:  # AttributeError(KeyError(message))
            e = e.args[0]
        hint = str(e).split("\n", 1)[1:]  # ml_collections' 'Did you mean "x" instead of "y"?'
        hint = f" ({hint[0]})" if hint else ""
        sys.exit(report(InputError(f"{name}: the config has no such field{hint}")))


# What the machine refuses to write (a full disk or quota, a read-only or someone else's
# directory): the user's to fix, not a bug.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def write_error(error: OSError) -> InputError:
    """An OSError of `WRITE_ERRNOS` as one line naming the path (the workdir when the error
    names none, as a failed write() does) and the OS's reason."""
    path = error.filename
    if path is None and "workdir" in flags.FLAGS and flags.FLAGS["workdir"].present:
        path = flags.FLAGS.workdir
    return InputError(f"{path or 'writing'}: {os.strerror(error.errno)}")


def _help_of(main) -> None:
    """`--help` shows the command's docstring and flags when `__main__` is not its module (a
    console script, or the checkout's `python -m finetune` forward): absl shows those of
    `__main__`."""
    module, entry = sys.modules[main.__module__], sys.modules["__main__"]
    if module is not entry:
        entry.__doc__ = module.__doc__
        for flag in flags.FLAGS.get_key_flags_for_module(module.__name__):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def run(main) -> None:
    """`absl.app.run(main)` with input errors, flag errors (`parse_flags`), a missing flag
    (`app.UsageError`) and the OS refusing a write (`WRITE_ERRNOS`) reported as
    `error: MESSAGE` (exit status 2), after `keep_freed_memory()`."""
    keep_freed_memory()

    def wrapped(argv):
        try:
            return main(argv)
        except (InputError, app.UsageError) as e:
            sys.exit(report(e))
        except OSError as e:
            if e.errno not in WRITE_ERRNOS:
                raise
            sys.exit(report(write_error(e)))

    _help_of(main)
    app.run(wrapped, flags_parser=parse_flags)

"""The command-line entry points' shared wrapper: the project's input errors (a bad file, field
or value; every one is a ValueError subclass whose message names what is wrong) end the program
with that one line and exit status 2, not a traceback. Anything else still shows its traceback."""

from __future__ import annotations

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


def run(main) -> None:
    """`absl.app.run(main)` with input errors reported as `error: MESSAGE` (exit status 2)."""

    def wrapped(argv):
        try:
            return main(argv)
        except _input_errors() as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            sys.exit(2)

    app.run(wrapped)

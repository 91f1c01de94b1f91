"""Train-state checkpoints: orbax CheckpointManager holding the state and the data iterator.

Orbax writes each step into a temporary directory and renames it when complete, so a crash
mid-save never leaves a half-written step that looks finished. A step that is finished but
unreadable (a corrupted file) is skipped on restore with a warning, and the previous one is used;
when none is readable the run is refused (`CheckpointError`) rather than silently started over,
which would overwrite them: `start_over=True` does that deliberately.
Every process writes its own parameter shards and its own grain iterator state.
"""

from __future__ import annotations

import logging

import grain
import jax
import orbax.checkpoint as ocp

from albert_jax.checkpoints.checkpoint import CheckpointError, short_error


class Checkpointer:
    def __init__(
        self, directory: str, keep: int = 3, keep_every: int | None = None, async_save: bool = True
    ):
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            keep_period=keep_every,
            enable_async_checkpointing=async_save,
            create=True,
        )
        self.manager = ocp.CheckpointManager(
            directory,
            options=options,
            item_handlers={
                "state": ocp.StandardCheckpointHandler(),
                "data": grain.checkpoint.CheckpointHandler(),
            },
        )

    def save(self, step: int, state, data_iterator, force: bool = False) -> bool:
        if step in self.manager.all_steps():  # an unreadable step skipped on restore: replace it
            logging.warning("replacing the existing (unreadable) checkpoint of step %d", step)
            self.manager.delete(step)
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            data=grain.checkpoint.CheckpointSave(data_iterator),
        )
        return self.manager.save(step, args=args, force=force)

    def restore_latest(self, abstract_state, data_iterator):
        """(state, step) from the newest readable checkpoint, or (None, None) if there is none.
        `abstract_state` is a tree of jax.ShapeDtypeStruct with shardings. Raises
        CheckpointError when there are checkpoints but none is readable."""
        failed = []
        for step in sorted(self.manager.all_steps(), reverse=True):
            try:
                restored = self.manager.restore(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(abstract_state),
                        data=grain.checkpoint.CheckpointRestore(data_iterator),
                    ),
                )
            except Exception as e:  # noqa: BLE001 - any unreadable step: fall back
                why = short_error(e)  # one line, not TensorStore's whole spec
                logging.warning(
                    "checkpoint step %d is unreadable (%s); trying the previous one", step, why
                )
                failed.append(f"step {step}: {why}")
                continue
            return restored.state, step
        if failed:
            raise CheckpointError(
                f"no checkpoint in {self.manager.directory} is readable ({'; '.join(failed)}): "
                "repair or move them, or pass --config.start_over=True to delete this run's "
                "outputs and train from step 0"
            )
        return None, None

    def reached_preemption(self, step: int) -> bool:
        """Multi-host preemption sync point (all processes agree); False on one process."""
        return jax.process_count() > 1 and self.manager.reached_preemption(step)

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()

"""Train-state checkpoints: orbax CheckpointManager holding the state and the data iterator.

Orbax writes each step into a temporary directory and renames it when complete, so a crash
mid-save never leaves a half-written step that looks finished. A step that is finished but
unreadable (a corrupted file) is skipped on restore with a warning, and the previous one is used;
when none is readable the run is refused (`CheckpointError`) rather than silently started over,
which would overwrite them: `start_over=True` does that deliberately.
Every process writes its own parameter shards and its own grain iterator state.

Typed PRNG keys (`jax.random.key`) in the state are written as their raw key data (uint32, the
layout a `jax.random.PRNGKey` key had) and wrapped again on restore: the files are the same as
before typed keys, so checkpoints of either kind restore.
"""

from __future__ import annotations

import logging

import grain
import jax
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec

from albert_jax.checkpoints import legacy
from albert_jax.checkpoints.checkpoint import CheckpointError, short_error

# A state tree that differs from the checkpoint's: another model or optimizer setting. Runs with
# `optim.frozen` written before frozen parameters lost their optimizer state are one such.
STRUCTURE_HINT = (
    "the checkpoint holds a train state of another model or optimizer setting; a run with "
    "optim.frozen from before frozen parameters kept no optimizer state cannot resume"
)


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def _keys_as_data(tree):
    """Typed keys -> their raw key data (what is written)."""
    return jax.tree_util.tree_map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _abstract_as_data(abstract):
    """The abstract state with each typed-key leaf replaced by its key data's shape."""

    def one(x):
        if not _is_key(x):
            return x
        data = jax.eval_shape(jax.random.key_data, x)
        sharding = x.sharding
        if isinstance(sharding, NamedSharding):  # the key data's trailing axis is not split
            extra = (None,) * (len(data.shape) - len(x.shape))
            spec = PartitionSpec(*sharding.spec, *([None] * (len(x.shape) - len(sharding.spec))))
            sharding = NamedSharding(sharding.mesh, PartitionSpec(*spec, *extra))
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding)

    return jax.tree_util.tree_map(one, abstract)


def _wrap_keys(restored, abstract):
    """Key data read back -> typed keys where `abstract` has them, placed as it says."""

    def one(x, want):
        if not _is_key(want):
            return x
        key = jax.random.wrap_key_data(x)
        if key.dtype != want.dtype:
            raise CheckpointError(f"a saved {key.dtype} key does not fit the state's {want.dtype}")
        return jax.device_put(key, want.sharding) if want.sharding is not None else key

    return jax.tree_util.tree_map(one, restored, abstract)


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
            state=ocp.args.StandardSave(_keys_as_data(state)),
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
                # A state written before every grouped leaf had its group axis is read as it
                # was written and converted (`legacy`).
                stored = getattr(self.manager.item_metadata(step)["state"], "tree", None)
                layout = legacy.stored_layout(
                    stored.get("params") if isinstance(stored, dict) else None,
                    getattr(abstract_state, "params", None),
                )
                target = legacy.legacy_abstract(abstract_state, layout) if layout else None
                restored = self.manager.restore(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(_abstract_as_data(target or abstract_state)),
                        data=grain.checkpoint.CheckpointRestore(data_iterator),
                    ),
                )
            except Exception as e:  # noqa: BLE001 - any unreadable step: fall back
                why = short_error(e)  # one line, not TensorStore's whole spec
                if "Structure mismatch" in why:
                    why += f" ({STRUCTURE_HINT})"
                logging.warning(
                    "checkpoint step %d is unreadable (%s); trying the previous one", step, why
                )
                failed.append(f"step {step}: {why}")
                continue
            state = restored.state
            if layout:
                state = legacy.from_legacy(state, abstract_state)
            return _wrap_keys(state, abstract_state), step
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

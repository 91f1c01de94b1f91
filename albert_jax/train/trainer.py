"""One trainer for pretraining and fine-tuning: sharded train state, jitted step with gradient
accumulation, evaluation, orbax checkpoints with exact resume, metrics.

A *task* supplies what differs between jobs (see `albert_jax.train.pretraining.PretrainingTask`):
`model_config`, `model`, `dummy_batch()`, `normalizers(batch)`, `loss(params, batch, normalizers,
rng)`, `train_iterator(process_index, process_count)`, `eval_iterator(...)` and
`flops_per_example()`. Its loss and metrics are sums over the examples it is given divided by
normalizers computed on the whole global batch, so the micro-batch contributions add up to exactly
the full-batch values.

Exact resume: the state holds the step, parameters, optimizer state and a base key; the dropout
key of step s is fold_in(key, s), the learning rate a function of s, and the data iterator state
is saved in the same checkpoint. Metrics are read one step late so the host never stalls the
device, except at checkpoints, where the state being saved is checked to be finite first.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from albert_jax import partitioning
from albert_jax.optim import make_optimizer
from albert_jax.train.checkpoints import Checkpointer
from albert_jax.train.metrics import MetricWriter, Progress


class NonFiniteLossError(FloatingPointError):
    pass


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array  # base key: dropout of step s uses fold_in(rng, s)


def maybe_initialize_distributed(config) -> None:
    """`jax.distributed.initialize()` when the config or the environment asks for it."""
    dist = config.get("distributed", None)
    wanted = bool(dist and dist.get("enabled", False)) or "JAX_COORDINATOR_ADDRESS" in os.environ
    if not wanted or jax.distributed.is_initialized():
        return
    kwargs = {}
    if dist:
        for key in ("coordinator_address", "num_processes", "process_id"):
            if dist.get(key, None) not in (None, ""):
                kwargs[key] = dist[key]
    jax.distributed.initialize(**kwargs)


def _split_micro(batch, steps: int, mesh):
    """[B, ...] -> [steps, B/steps, ...] with micro-batch i = examples i, i+steps, ...: every
    device's contiguous block holds examples of every micro-batch, so each stays spread."""

    def one(x):
        b = x.shape[0]
        if b % steps:
            raise ValueError(f"batch {b} is not divisible into {steps} micro-batches")
        y = x.reshape(b // steps, steps, *x.shape[1:]).swapaxes(0, 1)
        spec = PartitionSpec(None, ("data", "fsdp"), *([None] * (x.ndim - 1)))
        return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(one, batch)


def make_train_step(task, tx, schedule, mesh, accum_steps: int):
    grad_fn = jax.value_and_grad(task.loss, has_aux=True)

    def train_step(state: TrainState, batch):
        norms = task.normalizers(batch)
        key = jax.random.fold_in(state.rng, state.step)
        if accum_steps == 1:
            (loss, metrics), grads = grad_fn(state.params, batch, norms, key)
        else:
            micro = _split_micro(batch, accum_steps, mesh)

            def body(carry, xs):
                i, mb = xs
                (loss_i, m), g = grad_fn(state.params, mb, norms, jax.random.fold_in(key, i))
                return jax.tree_util.tree_map(jnp.add, carry, (loss_i, m, g)), None

            zeros = jax.eval_shape(lambda: grad_fn(state.params, batch, norms, key))
            zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), zeros)
            zeros = (zeros[0][0], zeros[0][1], zeros[1])
            (loss, metrics, grads), _ = jax.lax.scan(body, zeros, (jnp.arange(accum_steps), micro))
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = dict(
            metrics,
            loss=loss,
            grad_norm=optax.global_norm(grads),
            learning_rate=schedule(state.step),
        )
        new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
        return new_state, metrics

    return train_step


def make_eval_step(task):
    def eval_step(params, batch):
        return task.loss(params, batch, task.normalizers(batch), None)[1]

    return eval_step


def _rules(config):
    rules = config.get("logical_rules", None)
    return tuple(tuple(r) for r in rules) if rules else partitioning.DEFAULT_RULES


def create_state(task, tx, mesh, rules, seed: int):
    """(init function, state shardings, abstract state). Initialization goes through eval_shape,
    so nothing unsharded is ever materialized."""
    dummy = task.dummy_batch()

    def init_boxed(rng):
        params = task.model.init(rng, **dummy)["params"]
        return TrainState(
            step=jnp.zeros((), jnp.int32),
            params=params,
            opt_state=tx.init(params),
            rng=jax.random.fold_in(rng, 1),
        )

    boxed = jax.eval_shape(init_boxed, jax.random.PRNGKey(seed))
    shardings = partitioning.tree_shardings(boxed, mesh, rules)

    def init(rng):
        return nn.meta.unbox(init_boxed(rng))

    abstract = jax.tree_util.tree_map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        nn.meta.unbox(boxed),
        shardings,
    )
    return init, shardings, abstract


def global_batch(local: dict[str, np.ndarray], mesh) -> dict[str, jax.Array]:
    """Assemble the processes' local batches into global arrays sharded over ('data', 'fsdp')."""
    return {
        k: jax.make_array_from_process_local_data(partitioning.batch_sharding(mesh), v)
        for k, v in local.items()
    }


class _StopSignal:
    """SIGTERM (preemption) asks for a final checkpoint and a clean exit."""

    def __init__(self):
        self.requested = False
        try:
            signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread (e.g. inside some test runners)
            pass

    def _handle(self, signum, frame):
        logging.warning("SIGTERM received: saving a checkpoint and stopping")
        self.requested = True


def train(config, workdir: str, task) -> dict[str, float]:
    """Train (or resume) to `config.total_steps`; returns the last logged metrics."""
    maybe_initialize_distributed(config)
    is_main = jax.process_index() == 0
    workdir = os.path.abspath(workdir)  # orbax requires absolute paths
    os.makedirs(workdir, exist_ok=True)
    if is_main:
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json_best_effort(indent=2, sort_keys=True))

    mesh = partitioning.make_mesh(tuple(config.mesh_shape))
    rules = _rules(config)
    tx, schedule = make_optimizer(config.optim, task.model_config)
    init, shardings, abstract = create_state(task, tx, mesh, rules, int(config.seed))
    batch_shard = partitioning.batch_sharding(mesh)
    accum = int(config.get("grad_accum_steps", 1))

    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        step_fn = jax.jit(
            make_train_step(task, tx, schedule, mesh, accum),
            in_shardings=(shardings, batch_shard),
            out_shardings=(shardings, NamedSharding(mesh, PartitionSpec())),
            donate_argnums=(0,),
        )
        eval_fn = jax.jit(make_eval_step(task), in_shardings=(shardings.params, batch_shard))

        train_iter = task.train_iterator(jax.process_index(), jax.process_count())
        ckpt = Checkpointer(
            os.path.join(workdir, "checkpoints"),
            keep=int(config.keep_checkpoints),
            keep_every=config.get("keep_checkpoint_every", None) or None,
        )
        state, restored_step = ckpt.restore_latest(abstract, train_iter)
        if state is None:
            state = jax.jit(init, out_shardings=shardings)(jax.random.PRNGKey(int(config.seed)))
            start = 0
        else:
            start = int(restored_step)
        if is_main:
            print(
                f"{'resumed from step ' + str(start) if start else 'starting'}: "
                f"{task.model_config.layout} layout, mesh {dict(mesh.shape)}, "
                f"{jax.process_count()} process(es)",
                flush=True,
            )

        total = int(config.total_steps)
        writer = MetricWriter(workdir, enabled=is_main)
        progress = Progress(start, total, enabled=is_main and config.get("progress_bar", True))
        stop = _StopSignal()
        flops_per_step = task.flops_per_example() * int(config.data.global_batch_size)
        peak = float(config.get("peak_flops_per_device", 0.0)) * jax.device_count()
        last: dict[str, float] = {}
        pending = None  # (step, device metrics): read one step late
        interval_t, interval_steps = time.perf_counter(), 0

        def read(step, metrics):
            nonlocal interval_t, interval_steps, last
            values = {k: float(v) for k, v in jax.device_get(metrics).items()}
            if not np.isfinite(values["loss"]):
                raise NonFiniteLossError(
                    f"loss is {values['loss']} at step {step}; stopping. The last good "
                    f"checkpoint is kept in {workdir}/checkpoints (lower the learning rate, or "
                    "check the data with `python -m pretrain.inspect_data`)."
                )
            interval_steps += 1
            if step % int(config.log_every) == 0 or step == total:
                dt = (time.perf_counter() - interval_t) / interval_steps
                values["step_time_s"] = dt
                values["examples_per_s"] = int(config.data.global_batch_size) / dt
                values["tokens_per_s"] = values["examples_per_s"] * int(config.data.max_seq_length)
                values["model_tflops_per_s"] = flops_per_step / dt / 1e12
                if peak > 0:
                    values["mfu"] = flops_per_step / dt / peak
                writer.write(step, values)
                interval_t, interval_steps = time.perf_counter(), 0
            progress.update(step, values)
            last = values

        try:
            for step in range(start + 1, total + 1):
                batch = global_batch(next(train_iter), mesh)
                state, metrics = step_fn(state, batch)
                if pending is not None:
                    read(*pending)
                pending = (step, metrics)
                preempted = stop.requested or ckpt.reached_preemption(step)
                if step % int(config.checkpoint_every) == 0 or step == total or preempted:
                    read(*pending)  # never save a non-finite state
                    pending = None
                    ckpt.save(step, state, train_iter, force=True)
                if config.get("eval_every", 0) and step % int(config.eval_every) == 0:
                    evaluate(task, eval_fn, state.params, mesh, config, writer, step)
                    interval_t = time.perf_counter()  # step times exclude evaluation
                if preempted:
                    break
            if pending is not None:
                read(*pending)
        finally:
            ckpt.wait()
            ckpt.close()
            progress.close()
            writer.close()
    if is_main:
        print(json.dumps({"step": step if total > start else start, **last}), flush=True)
    return last


def evaluate(task, eval_fn, params, mesh, config, writer, step) -> dict[str, float]:
    """Mean of the per-batch metrics over `config.eval_batches` held-out batches."""
    it = task.eval_iterator(jax.process_index(), jax.process_count())
    sums: dict[str, float] = {}
    n = int(config.eval_batches)
    for _ in range(n):
        m = jax.device_get(eval_fn(params, global_batch(next(it), mesh)))
        for k, v in m.items():
            sums[k] = sums.get(k, 0.0) + float(v)
    values = {k: v / n for k, v in sums.items()}
    writer.write(step, values, prefix="eval")
    return values

"""One trainer for pretraining and fine-tuning: sharded train state, jitted step with gradient
accumulation, evaluation, orbax checkpoints with exact resume, metrics.

A *job* (`albert_jax.train.task.Job`: the task model, its data, evaluator, starting weights and
callbacks; pretraining's and every fine-tuning task's in `albert_jax.tasks`) supplies everything
that differs between jobs; `train()` knows no task by name. The task's loss and metrics are sums
over the examples it is given divided by normalizers computed on the whole global batch, so the
micro-batch contributions add up to exactly the full-batch values. Evaluation is the evaluator's:
the trainer hands it a function that runs the jitted `eval_step` on a process-local batch and
returns the gathered global outputs on the host.

Exact resume: the state holds the step, parameters, optimizer state and a base key; the dropout
key of step s is fold_in(key, s), the learning rate a function of s, and the data iterator state
is saved in the same checkpoint (that of the batches the steps took: `DevicePrefetch` holds the
next one on device ahead of its step).

The loop itself is `albert_jax.train.loop.run`; `train()` gives it its hooks (log, checkpoint,
evaluate and keep the best, the NaN guard's message, preemption, progress, profiler). The
distributed start, the workdir lock, the compilation cache and the dtype checks stay here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from etils import epath
from flax import traverse_util
from jax.sharding import NamedSharding, PartitionSpec

from albert_jax import paths, provenance
from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.train_state import Checkpointer
from albert_jax.model.albert import target_platform
from albert_jax.train import lock, loop, partitioning, trackers
from albert_jax.train.config import (
    Distributed,
    EvalConfig,
    Plan,
    TrainConfigError,
    TrainerConfig,
    read_evals,
)
from albert_jax.train.faults import crash_point
from albert_jax.train.goodput import FILE as GOODPUT_FILE
from albert_jax.train.goodput import Goodput, TimedInput, summary_line
from albert_jax.train.gradients import batch_gradients
from albert_jax.train.loop import StopSignal
from albert_jax.train.metrics import MetricWriter, Progress, log_to_file
from albert_jax.train.optim import check_patterns, make_optimizer, path_matcher
from albert_jax.train.prefetch import DevicePrefetch
from albert_jax.train.task import Job, Task


def check_batch(batch_size: int, accum: int, mesh) -> None:
    """Every micro-batch must split evenly over the devices the batch is sharded on."""
    shards = partitioning.batch_shards(mesh.shape)
    if batch_size % (accum * shards):
        raise TrainConfigError(
            f"the global batch of {batch_size} examples in {accum} micro-batch(es) does not "
            f"split over the {shards} devices of the batch axes (mesh {dict(mesh.shape)}): make "
            f"it a multiple of {accum * shards} (data.global_batch_size for pretraining, "
            "batch_size for fine-tuning) or change mesh_shape / grad_accum_steps"
        )


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array  # base key: dropout of step s uses fold_in(rng, s)


def _cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX; Linux's flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(flag in f.read().split() for flag in ("avx512_bf16", "amx_bf16"))
    except OSError:
        return False


def dtype_warning(dtype) -> str | None:
    """A line for bfloat16 on a CPU without native bf16: XLA then converts around float32
    matmuls, and a step takes ~1.35x as long as in float32 (benchmarks/bf16_curve.py)."""
    if dtype != "bfloat16" or jax.default_backend() != "cpu" or _cpu_has_bf16():
        return None
    return (
        "warning: execution.dtype=bfloat16 on a CPU without native bf16 runs ~1.35x slower "
        "than float32 (--config.execution.dtype=float32)"
    )


def check_dtype(dtype, param_dtype=None) -> None:
    """Refuses float16 for training, in one line: there is no loss scaling, so gradients below
    ~6e-8 round to zero (below ~6e-5 they lose precision) and activations over 65504 overflow.
    bfloat16 has float32's range. Weights *stored* in float16 (a converted checkpoint's) are
    cast when loaded: only the dtypes a run computes and keeps its parameters in are refused."""
    for name, value in (("dtype", dtype), ("param_dtype", param_dtype)):
        if value is not None and str(value) == "float16":
            instead = "bfloat16" if name == "dtype" else "float32"
            raise TrainConfigError(
                f"execution.{name}=float16 cannot train: there is no loss scaling, so small "
                f"gradients underflow to zero; use bfloat16 (float32's range) or float32 "
                f"(--config.execution.{name}={instead})"
            )


def maybe_initialize_distributed(config) -> None:
    """`jax.distributed.initialize()` when the config or the environment asks for it."""
    dist = TrainerConfig.from_config(config).distributed
    if not (dist.enabled or "JAX_COORDINATOR_ADDRESS" in os.environ):
        return
    if jax.distributed.is_initialized():
        return
    kwargs = {}
    if dist.enabled:  # a field left at its default is discovered by JAX
        default = Distributed()
        for key in ("coordinator_address", "num_processes", "process_id"):
            if getattr(dist, key) != getattr(default, key):
                kwargs[key] = getattr(dist, key)
    jax.distributed.initialize(**kwargs)


def make_train_step(task: Task, tx, schedule, mesh, accum_steps: int, params):
    """(state, global batch) -> (state, metrics): the gradients of the whole batch
    (`albert_jax.train.gradients`: each device's share, one reduction per step), then the
    optimizer update on the sharded state. `params`: the abstract parameters (shapes and
    shardings); stacked leaves of more than one group are gathered per layer application."""
    specs = jax.tree_util.tree_map(lambda x: x.sharding.spec, params)
    shapes = traverse_util.flatten_dict(params, sep="/")
    per_layer = frozenset(p for p in task.stacked_paths() if p in shapes and shapes[p].shape[0] > 1)
    gradients = batch_gradients(task, mesh, specs, accum_steps, per_layer)

    def train_step(state: TrainState, batch):
        norms = task.normalizers(batch)
        key = jax.random.fold_in(state.rng, state.step)
        loss, metrics, grads = gradients(state.params, batch, norms, key)
        metrics = task.finish_metrics(metrics)  # ratios of the accumulated sums
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


def param_shapes(task):
    """The train state's parameter tree as ShapeDtypeStructs (logical boxes removed)."""
    params = jax.eval_shape(lambda: task.model.init(jax.random.key(0), **task.dummy_batch()))
    return nn.meta.unbox(params["params"])


def create_state(task, tx, mesh, rules):
    """(init function, state shardings, abstract state). Initialization goes through eval_shape,
    so nothing unsharded is ever materialized (the seed comes with `init`'s key)."""
    dummy = task.dummy_batch()

    def init_boxed(rng):
        params = task.model.init(rng, **dummy)["params"]
        return TrainState(
            step=jnp.zeros((), jnp.int32),
            params=params,
            opt_state=tx.init(params),
            rng=jax.random.fold_in(rng, 1),
        )

    boxed = jax.eval_shape(init_boxed, jax.random.key(0))
    shardings = partitioning.tree_shardings(boxed, mesh, rules)

    def init(rng):
        return nn.meta.unbox(init_boxed(rng))

    abstract = jax.tree_util.tree_map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        nn.meta.unbox(boxed),
        shardings,
    )
    return init, shardings, abstract


@dataclasses.dataclass
class CompiledTask:
    """A job's mesh, state shardings and jitted functions: what one training run (or every
    trial of the learning-rate search, `albert_jax.jobs.lr_search`) compiles once."""

    job: Job
    mesh: Any
    rules: tuple
    shardings: Any
    abstract: Any
    init_fn: Callable  # key -> TrainState (fresh weights)
    step_fn: Callable  # (state, global batch) -> (state, metrics)
    eval_fn: Callable  # (params, global batch) -> eval outputs

    def scope(self):
        """The context the jitted functions are traced and run in: the mesh, the logical axis
        rules and the mesh's platform (the model's `auto` switches resolve for it)."""
        stack = contextlib.ExitStack()
        stack.enter_context(jax.set_mesh(self.mesh))
        stack.enter_context(nn.logical_axis_rules(self.rules))
        stack.enter_context(target_platform(self.mesh.devices.flat[0].platform))
        return stack

    def lower(self, batch):
        """The train step lowered for the abstract `batch` ({name: ShapeDtypeStruct} of one
        global batch) on the abstract state: nothing is materialized or run."""
        sharding = partitioning.batch_sharding(self.mesh)
        batch = {
            k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding) for k, v in batch.items()
        }
        with self.scope():
            return self.step_fn.lower(self.abstract, batch)

    def initial_state(self, seed: int, announce: bool = False) -> TrainState:
        """Fresh state for `seed` with the job's starting weights loaded (`load_pretrained`);
        `announce`: print what was loaded, what is new and what was dropped."""
        start = self.job.start
        state = self.init_fn(jax.random.key(seed))
        source = start.params()
        if source is None:
            return state
        params, report = load_pretrained(state.params, source, self.shardings.params, start.fresh)
        if announce:
            print(
                f"initialized from {start.source}: "
                f"loaded {len(report['loaded'])} ({_summarize(report['loaded'])}), "
                f"new {len(report['new'])} ({_summarize(report['new'])}), dropped "
                f"{len(report['dropped'])} ({_summarize(report['dropped'])})",
                flush=True,
            )
            logging.info("pretrained weights: %s", json.dumps(report))
        return state.replace(params=params)

    def evaluate(self, params, step, split=None, final=False):
        """The evaluator's metrics of `params` (predict, score, check), each batch through
        `eval_fn`; a `final` split's predictions then go to `callbacks.write_predictions`."""

        def run(local):
            return to_host(self.eval_fn(params, global_batch(local, self.mesh)))

        run.params = params  # for tasks that drive the model themselves (generation)
        write = self.job.callbacks.write_predictions if final else None
        return self.job.evaluator.evaluate(run, step, split, write)


def compile_task(
    config,
    job: Job,
    extra_tx: optax.GradientTransformation | None = None,
    devices=None,
    plan: Plan | None = None,
):
    """The `CompiledTask` of `job` under `config` (mesh, accumulation, optimizer) and its
    `plan` (default: the config's own, `Plan.of`); `extra_tx` is chained after the optimizer
    (the search's per-trial learning rate). `devices`: what the mesh is made of (default
    `jax.devices()`; compile-only TPU devices for `pretrain.compile`)."""
    task = job.task
    check_dtype(task.execution.dtype, task.execution.param_dtype)  # ELECTRA's: the same
    t = TrainerConfig.from_config(config)
    mesh = partitioning.make_mesh(t.mesh_shape, devices, slices=t.slices)
    accum = t.grad_accum_steps
    check_batch(int(job.global_batch_size), accum, mesh)
    rules = t.logical_rules or partitioning.DEFAULT_RULES
    shapes = param_shapes(task)
    optim = (plan or Plan.of(config)).optim_config(config)
    check_patterns(shapes, optim)  # a multiplier or frozen regex that matches nothing
    try:
        tx, schedule = make_optimizer(
            optim, task.model_config, shapes, stacked=task.stacked_paths()
        )
    except ValueError as e:  # a bad optim.* value (steps, name, multipliers): one line, exit 2
        raise TrainConfigError(f"optim: {e}") from e
    if extra_tx is not None:
        tx = optax.chain(tx, extra_tx)
    init, shardings, abstract = create_state(task, tx, mesh, rules)
    batch_shard = partitioning.batch_sharding(mesh)
    step_fn = jax.jit(
        make_train_step(task, tx, schedule, mesh, accum, abstract.params),
        in_shardings=(shardings, batch_shard),
        out_shardings=(shardings, NamedSharding(mesh, PartitionSpec())),
        donate_argnums=(0,),
    )
    eval_fn = jax.jit(task.eval_step, in_shardings=(shardings.params, batch_shard))
    init_fn = jax.jit(init, out_shardings=shardings)
    return CompiledTask(job, mesh, rules, shardings, abstract, init_fn, step_fn, eval_fn)


def global_batch(local: dict[str, np.ndarray], mesh) -> dict[str, jax.Array]:
    """Assemble the processes' local batches into global arrays sharded over ('data', 'fsdp')
    (one call for all fields: half the host time of one call per field)."""
    return jax.make_array_from_process_local_data(partitioning.batch_sharding(mesh), dict(local))


def to_host(tree):
    """Global arrays -> NumPy on every process (an all-gather when there are several)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def load_pretrained(params, source: dict[str, np.ndarray], shardings, fresh=()) -> tuple:
    """`params` with every leaf that `source` ({path: array}) has replaced by it, placed with its
    sharding. Leaves matching a `fresh` regex keep their initialization. Returns (params,
    report): what was loaded, what is new, what was dropped. A shape mismatch on a leaf that is
    not declared fresh is an error naming the leaf."""
    is_fresh = path_matcher(tuple(fresh) or None)
    flat = traverse_util.flatten_dict(params, sep="/")
    flat_shardings = traverse_util.flatten_dict(shardings, sep="/")
    loaded, new, bad = [], [], []
    for path, leaf in flat.items():
        if path not in source or is_fresh(path):
            new.append(path)
            continue
        value = np.asarray(source[path])
        if value.shape != leaf.shape:
            bad.append(f"{path}: source {value.shape}, model {leaf.shape}")
            continue
        flat[path] = jax.device_put(value.astype(leaf.dtype), flat_shardings[path])
        loaded.append(path)
    if bad:
        raise ValueError(
            "pretrained weights do not fit the model: " + "; ".join(bad) + ". A head trained for "
            "another label set must start fresh: add its path regex to `fresh_params` "
            "(e.g. --config.fresh_params='^classifier/')"
        )
    dropped = sorted(set(source) - set(loaded) - set(new))
    report = {"loaded": sorted(loaded), "new": sorted(new), "dropped": dropped}
    return traverse_util.unflatten_dict(flat, sep="/"), report


def _summarize(paths: list[str]) -> str:
    """'embeddings/*, encoder/*' style summary of a path list (top two levels)."""
    tops = sorted({"/".join(p.split("/")[:2]) for p in paths})
    return ", ".join(tops) if tops else "none"


def train(config, workdir: str, job: Job, plan: Plan | None = None) -> dict[str, float]:
    """Train (or resume) `job` to `plan.total_steps` (default: the config's own plan,
    `Plan.of`); returns the last logged training metrics.

    What is evaluated when is `config.evals` (`albert_jax.train.config.EvalConfig`; the job's
    defaults without it). With `callbacks.best_metric`, the best evaluation's parameters are kept
    as a model checkpoint in `workdir/best` (`best.json` says which step), and at the end the
    final evaluators are evaluated with them; everything evaluated is also in
    `workdir/results.json`."""
    maybe_initialize_distributed(config)
    workdir = paths.resolve(workdir)  # orbax wants absolute paths; a bucket URI stays one
    with lock.hold(workdir, enabled=jax.process_index() == 0):  # one run per workdir
        return _train(config, workdir, job, plan or Plan.of(config))


# What a run writes into its workdir, all of it rebuilt from the checkpoints or from step 0.
RUN_OUTPUTS = (
    "checkpoints", "best", "best.json", "metrics.jsonl", "metrics.jsonl.parts", "results.json",
    "tensorboard", "predictions", provenance.RUN_FILE, GOODPUT_FILE,
)  # fmt: skip


def start_over(workdir: str) -> None:
    """Delete what an earlier run wrote into `workdir` (`RUN_OUTPUTS`; the corpus under data/
    and anything else stay), so that training starts exactly as a fresh run."""
    for name in RUN_OUTPUTS:
        path = epath.Path(workdir) / name
        if path.is_dir():
            path.rmtree()
        elif path.exists():
            path.unlink()


def _train(config, workdir: str, job: Job, plan: Plan) -> dict[str, float]:
    goodput = Goodput()  # from the process's start: where the run's time goes
    is_main = jax.process_index() == 0
    t = TrainerConfig.from_config(config)
    trackers.check(t.trackers)  # an unknown or uninstalled tracker fails before any work
    # before anything is written: an unknown split fails here, naming its key
    evals = read_evals(config, job.evals, job.evaluator.splits) if job.evaluator else {}
    during = training_evals(evals, job, plan.eval_every)
    primary = next(iter(during), None)
    if is_main:
        if t.start_over:
            start_over(workdir)
            print(f"start_over: removed the earlier run's outputs in {workdir}", flush=True)
        epath.Path(workdir).mkdir(parents=True, exist_ok=True)
        log_to_file(workdir)
        record = plan.record(config).to_json_best_effort(indent=2, sort_keys=True)
        paths.write_text(paths.join(workdir, "config.json"), record)
    if t.start_over and jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("start_over")  # the others wait for the deletion

    use_compilation_cache(t.compilation_cache_dir, workdir)
    run = compile_task(config, job, plan=plan)
    mesh, shardings, callbacks = run.mesh, run.shardings, job.callbacks
    if is_main:
        record_start(workdir, mesh)
    batch_size = int(job.global_batch_size)
    with run.scope():
        # jit compiles the step at its first call: that call's time is compilation
        step_fn, evaluate = goodput.first_call(run.step_fn), run.evaluate
        train_iter = job.train_iterator(jax.process_index(), jax.process_count())
        batches = DevicePrefetch(train_iter, lambda local: global_batch(local, mesh))
        ckpt = Checkpointer(
            paths.join(workdir, "checkpoints"),
            keep=t.keep_checkpoints,
            keep_every=t.keep_checkpoint_every or None,
        )
        with goodput.timed("checkpoint_restore"):  # or a fresh run's initial weights
            state, restored_step = ckpt.restore_latest(run.abstract, batches)
            if state is None:
                state, start = run.initial_state(plan.seed, announce=is_main), 0
            else:
                start = int(restored_step)
        if is_main:
            print(
                f"{'resumed from step ' + str(start) if start else 'starting'}: "
                f"{job.task.model_config.layout} layout, mesh {dict(mesh.shape)}, "
                f"{jax.process_count()} process(es)",
                flush=True,
            )

        total = plan.total_steps
        if is_main:  # before the writer drops the rows past the checkpoint
            goodput.resume(workdir, start)
        writer = MetricWriter(
            workdir,
            enabled=is_main,
            resume_step=start,
            trackers=t.trackers,
            sync_every_s=t.metrics_sync_s,
            wandb_project=t.wandb_project,
        )
        progress = Progress(
            start,
            total,
            enabled=is_main,
            bar=t.progress_bar,
            keys=callbacks.progress_keys,
        )
        best = _Best(workdir, callbacks.best_metric)
        stop = StopSignal()
        profile = Profile(t.profile_range(), paths.join(workdir, "tensorboard"))
        flops_per_step = job.flops_per_example * batch_size
        peak = t.peak_flops_per_device * jax.device_count()

        def log(step, values, step_time):
            values["step_time_s"] = step_time
            values["examples_per_s"] = batch_size / step_time
            values["tokens_per_s"] = values["examples_per_s"] * int(job.seq_length)
            values["model_tflops_per_s"] = flops_per_step / step_time / 1e12
            values["train_flops"] = flops_per_step * step  # for equal-compute comparisons
            if peak > 0:
                values["mfu"] = flops_per_step / step_time / peak
            writer.write(step, values)
            writer.write(step, goodput.summary(), prefix="goodput")
            return values

        def save(step, state):
            ckpt.save(step, state, batches, force=True)
            writer.sync()  # a bucket run's metrics so far reach the bucket (in the background)
            if is_main:  # a killed run's goodput as of its last checkpoint
                goodput.write(workdir, step)
            crash_point("checkpoint", step)

        def evaluate_due(step, state):
            for name, (e, every, split) in during.items():
                if step % every == 0 or step == total:
                    values = kept(name, e, evaluate(state.params, step, split))
                    if name == primary:
                        evaluate_and_keep_best(step, state, values)
                    else:
                        writer.write(step, values, prefix=f"eval_{name}")
                        progress.write(f"step {step}: eval {name} " + _format(values))

        def evaluate_and_keep_best(step, state, values):
            crash_point("eval", step)
            writer.write(step, values, prefix="eval")
            progress.write(f"step {step}: eval " + _format(values))
            if callbacks.on_evaluation is not None:
                callbacks.on_evaluation(state.params, step)
            if best.update(step, values):
                # to_host: a collective, every process takes part
                host = to_host(state.params)
                if is_main:  # written atomically: a crash keeps the previous best
                    callbacks.save_model(paths.join(workdir, "best"), host, best.record)
                crash_point("best", step)
                best.commit(is_main)

        def nonfinite(step, loss):
            kept = ckpt.manager.latest_step()  # only what exists is claimed
            where = (
                f"The last good checkpoint (step {kept}) is kept in {workdir}/checkpoints"
                if kept is not None
                else "No checkpoint was written before it"
            )
            return (
                f"loss is {loss} at step {step}; stopping. {where} (lower the learning rate, or "
                "check the data: `python -m pretrain.inspect_data`, a fine-tuning file's labels)."
            )

        def before_step(step):
            goodput.stepping(step)  # productive, or redone
            profile.before(step)

        def after_step(step, state):
            profile.after(step, state)
            crash_point("step", step)

        # A step's checkpoint is written before its evaluation: a run killed in between (or
        # before best.json) resumes by evaluating the restored step again. Evaluation is
        # deterministic, so its row, the best model and the final results come out the same.
        hooks = loop.Hooks(
            log=log,
            log_every=t.log_every,
            checkpoint=goodput.charged("checkpoint_save", save),
            checkpoint_every=plan.checkpoint_every,
            evaluate=goodput.charged("eval", evaluate_due) if during else None,
            eval_every=tuple(every for _, every, _ in during.values()),
            preempted=lambda step: stop.requested or ckpt.reached_preemption(step),
            nonfinite=nonfinite,
            progress=progress.update,
            before_step=before_step,
            after_step=after_step,
        )
        try:
            result = loop.run(step_fn, state, TimedInput(batches, goodput), start, total, hooks)
        finally:
            goodput.charge_to(None)  # after the loop: only what is timed
            profile.stop()
            with goodput.timed("checkpoint_save"):
                ckpt.wait()
            ckpt.close()
            progress.close()
            writer.close()
        step, last = result.step, result.synced

        if best.enabled and step == total and best.step is not None:
            finals = {name: e for name, e in evals.items() if e.final}
            with goodput.timed("eval"):
                _final_evaluation(callbacks, finals, evaluate, best, shardings, workdir, is_main)
    goodput.finish()
    if is_main:
        print(summary_line(goodput.write(workdir, step)["runs"][-1]), flush=True)
        print(json.dumps({"step": step, **last}), flush=True)
    return last


def record_start(workdir: str, mesh) -> None:
    """Appends this start's provenance (`albert_jax.provenance`) to WORKDIR/provenance.jsonl:
    one record per start, since a resumed run may run other code or on other machines. The file
    is rewritten whole (an object store has no append): once per start, a few lines."""
    path = paths.join(workdir, provenance.RUN_FILE)
    rows = epath.Path(path).read_bytes().decode() if paths.is_file(path) else ""
    paths.write_text(path, rows + json.dumps(provenance.collect(mesh), sort_keys=True) + "\n")


def use_compilation_cache(where: str, workdir: str) -> None:
    """JAX's persistent compilation cache, so a restarted or resumed run (a preempted pod slice)
    skips XLA's compile: `config.compilation_cache_dir` (a bucket path works too), by default
    WORKDIR/compilation_cache on GPU and TPU (a CPU run compiles in seconds: only where named);
    'none' turns it off. The first directory set in a process stays (JAX keeps one cache per
    process), as does one the user set (JAX_COMPILATION_CACHE_DIR)."""
    if where.lower() == "none" or jax.config.jax_compilation_cache_dir:
        return
    if not where and jax.default_backend() == "cpu":
        return
    jax.config.update(
        "jax_compilation_cache_dir", where or paths.join(workdir, "compilation_cache")
    )


class Profile:
    """`jax.profiler` trace of steps START..END-1 (`TrainerConfig.profile_steps`; None: off) into
    `logdir` (WORKDIR/tensorboard: TensorBoard's profile plugin reads it beside the metrics).
    Process 0 traces; the trace stops after the device finished step END-1."""

    def __init__(self, steps: tuple[int, int] | None, logdir: str):
        self.start, self.end = steps or (None, None)
        self.logdir, self.active = logdir, False

    def before(self, step: int) -> None:
        if step == self.start and jax.process_index() == 0:
            jax.profiler.start_trace(self.logdir)
            self.active = True

    def after(self, step: int, state) -> None:
        if self.active and step == self.end - 1:
            jax.block_until_ready(state)
            self.stop()

    def stop(self) -> None:
        if self.active:
            jax.profiler.stop_trace()
            self.active = False
            logging.info("profile of steps %d-%d written to %s", self.start, self.end - 1,
                         self.logdir)  # fmt: skip


def _format(values: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in values.items() if isinstance(v, float | int))


class _Best:
    """The best evaluation so far by the task's metric, persisted in `workdir/best.json` so a
    resumed run keeps comparing against it."""

    def __init__(self, workdir: str, spec):
        self.path = epath.Path(workdir) / "best.json"
        self.enabled = spec is not None
        self.name, self.mode = spec if spec else (None, None)
        self.step, self.value, self.record = None, None, {}
        if self.enabled and self.path.exists():
            saved = json.loads(self.path.read_text())
            self.step, self.value, self.record = saved["step"], saved["value"], saved
        self._candidate = None

    def update(self, step: int, values: dict[str, float]) -> bool:
        if not self.enabled:
            return False
        if self.name not in values:
            raise KeyError(
                f"best_metric {self.name!r} is not among the eval metrics {sorted(values)}"
            )
        v = float(values[self.name])
        better = self.value is None or (v > self.value if self.mode == "max" else v < self.value)
        if better:
            self._candidate = {"step": step, "metric": self.name, "value": v, "eval": values}
            self.record = self._candidate
        return better

    def commit(self, is_main: bool) -> None:
        """After the model checkpoint is written: best.json points at it."""
        c = self._candidate
        self.step, self.value = c["step"], c["value"]
        if is_main:
            paths.write_text(self.path, json.dumps(c, indent=2))


def training_evals(evals: dict[str, EvalConfig], job: Job, eval_every: int) -> dict:
    """name -> (evaluator, steps between its evaluations, the split it scores: the evaluator's
    fixed sample with `sample`) of the evaluators that run during training, in order; the first
    is the run's own `eval` (it picks the best model)."""
    out = {}
    for name, e in evals.items():
        every = e.every or eval_every
        if e.every < 0 or every <= 0:
            continue
        split = e.split or None
        if e.sample:
            try:
                split = job.evaluator.sample(split, e.sample)
            except ValueError as err:
                raise TrainConfigError(f"evals.{name}.sample={e.sample}: {err}") from None
        out[name] = (e, every, split)
    return out


def kept(name: str, e: EvalConfig, values: dict[str, float]) -> dict[str, float]:
    """The metrics evaluator `name` keeps of `values` (`e.names`; all when empty); a name not
    among them is an error naming the key."""
    if not e.names or not values:  # {}: a split without a file (fine-tuning's test)
        return values
    if missing := [m for m in e.names if m not in values]:
        raise TrainConfigError(
            f"evals.{name}.metrics: {missing} not among the metrics {sorted(values)}"
        )
    return {k: v for k, v in values.items() if k in e.names}


def _final_evaluation(callbacks, finals, evaluate, best, shardings, workdir, is_main) -> None:
    """Evaluate the `finals` ({name: EvalConfig}) with the best parameters (their predictions
    written by `callbacks.write_predictions`); results.json gets the best step's metrics and
    these, by name."""
    crash_point("final")
    _, params = checkpoint.load(paths.join(workdir, "best"))
    params = jax.tree_util.tree_map(jax.device_put, params, shardings.params)
    results = {**callbacks.results_info}
    results.update(best_step=best.step, metric=best.name, best_eval=best.record["eval"])
    for name, e in finals.items():
        values = kept(name, e, evaluate(params, best.step, e.split or None, final=True))
        results[name] = values
        if is_main:
            print(f"best step {best.step}, {name}: " + _format(values), flush=True)
    if is_main:
        text = json.dumps(results, indent=2, sort_keys=True)
        paths.write_text(paths.join(workdir, "results.json"), text)

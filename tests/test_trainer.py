"""The trainer end to end on a synthetic task (tests/trainer_worker.py): gradient accumulation,
mesh independence, bit-exact resume, corrupted-checkpoint fallback, NaN stop, metrics.jsonl and
TensorBoard output. 8 fake CPU devices (conftest.py). In processes of its own (SIGKILL, SIGTERM,
two processes): tests/integration/test_trainer_processes.py."""

from __future__ import annotations

import glob
import logging
import os
import shutil
import struct
import sys

import jax
import numpy as np
import pytest
import trainer_worker
from jax.sharding import NamedSharding, PartitionSpec
from support.trainer import (
    EXACT_KEYS,
    N,
    assert_trees_equal,
    ckpt_steps,
    load_state,
    read_metrics,
    run,
)
from trainer_worker import BATCH, make_config, make_global_batch, make_task

from albert_jax.checkpoints.train_state import Checkpointer
from albert_jax.train import loop, partitioning, trainer
from albert_jax.train.loop import NonFiniteLossError
from albert_jax.train.optim import make_optimizer
from albert_jax.train.trainer import (
    compile_task,
    create_state,
    make_train_step,
    train,
)

HERE = os.path.dirname(os.path.abspath(__file__))
METRIC_KEYS = (
    "loss",
    "mlm_loss",
    "mlm_accuracy",
    "sop_loss",
    "sop_accuracy",
    "grad_norm",
    "learning_rate",
    "step_time_s",
    "tokens_per_s",
    "model_tflops_per_s",
    "mfu",
)


# --------------------------------------------------------------------------- gradient accumulation


def _direct_steps(mesh, accum, steps, optim_overrides=None, model=None):
    """Run make_train_step directly on `mesh`; returns (per-step metrics, final params)."""
    config = make_config(total_steps=steps, **(optim_overrides or {}))
    task = make_task(config, model=model)
    tx, schedule = make_optimizer(config.optim, task.model_config)
    rules = partitioning.DEFAULT_RULES
    import flax.linen as nn

    init, shardings, abstract = create_state(task, tx, mesh, rules)  # as train(): outside
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        state = jax.jit(init, out_shardings=shardings)(jax.random.key(0))
        initial = jax.tree_util.tree_map(np.asarray, jax.device_get(state.params))
        step_fn = jax.jit(
            make_train_step(task, tx, schedule, mesh, accum, abstract.params),
            in_shardings=(shardings, partitioning.batch_sharding(mesh)),
            out_shardings=(shardings, NamedSharding(mesh, PartitionSpec())),
        )
        history = []
        for i in range(steps):
            state, m = step_fn(state, trainer.global_batch(make_global_batch(i), mesh))
            history.append({k: float(v) for k, v in jax.device_get(m).items()})
        params = jax.tree_util.tree_map(np.asarray, jax.device_get(state.params))
    return history, initial, params


def test_grad_accumulation_matches_full_batch():
    """4 micro-batches of 2 vs one batch of 8, 3 steps (lr > 0 from step 2 on): losses, metrics
    and parameters agree to 1e-6 relative (float32 summation order differs, nothing else)."""
    mesh = partitioning.make_mesh((2, 1, 1), devices=jax.devices()[:2])
    full, p_init, p_full = _direct_steps(mesh, 1, 3)
    accum, _, p_accum = _direct_steps(mesh, 4, 3)
    for a, b in zip(full, accum, strict=True):
        for k in ("loss", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy", "grad_norm"):
            np.testing.assert_allclose(b[k], a[k], rtol=1e-6, atol=1e-7, err_msg=k)
        assert a["learning_rate"] == b["learning_rate"]
    assert full[-1]["learning_rate"] > 0
    # The params really moved (else the comparison would be vacuous).
    moved = jax.tree_util.tree_map(lambda x, y: np.max(np.abs(x - y)), p_full, p_init)
    assert max(jax.tree_util.tree_leaves(moved)) > 1e-5
    jax.tree_util.tree_map(
        lambda x, y: np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7), p_full, p_accum
    )


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_unrolled_encoder_trains_as_the_scanned_one_on_the_same_tree():
    """Scan vs unrolled is execution only: the train state holds the same stacked [G, ...]
    leaves either way (G = 1 for a shared block), and the steps agree (LAMB's trust ratio per
    group either way)."""
    from trainer_worker import tiny_model_config

    mesh = partitioning.make_mesh((2, 1, 1), devices=jax.devices()[:2])
    for layout, groups in (("none", 4), ("all", 1)):
        model = tiny_model_config().with_layout(layout)
        scan, loop = ({"execution.scan_layers": s} for s in (True, False))
        scanned, _, p_scan = _direct_steps(mesh, 1, 3, scan, model=model)
        unrolled, _, p_loop = _direct_steps(mesh, 1, 3, loop, model=model)
        assert jax.tree.structure(p_scan) == jax.tree.structure(p_loop)
        for p in (p_scan, p_loop):
            assert p["encoder"]["attention"]["query"]["kernel"].shape == (groups, 32, 32)
        for a, b in zip(scanned, unrolled, strict=True):
            np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-5)
        jax.tree_util.tree_map(
            lambda x, y: np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6), p_scan, p_loop
        )


def test_grad_accumulation_rejects_indivisible_batch():
    mesh = partitioning.make_mesh((1, 1, 1), devices=jax.devices()[:1])
    with pytest.raises(ValueError, match="not divisible into 3 micro-batches"):
        _direct_steps(mesh, 3, 2)


# --------------------------------------------------------------------------- mesh independence


@pytest.mark.parametrize("mesh_shape", [(2, 4, 1), pytest.param((1, 8, 1), marks=pytest.mark.slow)])
def test_sharded_losses_match_single_device(straight, tmp_path, mesh_shape):
    """train() on (data=2, fsdp=4) / (fsdp=8) vs (data=8) vs a direct single-device run of the
    same steps: the 6 losses and grad norms agree to 1e-5 relative (float32 reduction order)."""
    run(tmp_path, total_steps=N, mesh_shape=mesh_shape)
    sharded = read_metrics(tmp_path)
    data_parallel = read_metrics(straight[0])
    single, _, _ = _direct_steps(partitioning.make_mesh((1, 1, 1), devices=jax.devices()[:1]), 1, N)
    assert sorted(sharded) == list(range(1, N + 1))
    for s in range(1, N + 1):
        for k in ("loss", "mlm_loss", "sop_loss", "grad_norm"):
            np.testing.assert_allclose(sharded[s][k], single[s - 1][k], rtol=1e-5, err_msg=k)
            np.testing.assert_allclose(data_parallel[s][k], single[s - 1][k], rtol=1e-5)
    # Training changed the loss: the comparison is not between constants.
    assert abs(single[-1]["loss"] - single[0]["loss"]) > 1e-3


# --------------------------------------------------------------------------- resume


def test_resume_is_bit_exact(straight, tmp_path):
    """Stop after step 4 (total_steps=4, same schedule), rerun to 6: params, optimizer state and
    the per-step metrics of steps 5 and 6 are bitwise those of the straight run."""
    straight_dir, _ = straight
    run(tmp_path, total_steps=4, **{"optim.total_steps": N})
    assert ckpt_steps(tmp_path) == [2, 4]
    run(tmp_path, total_steps=N)
    assert ckpt_steps(tmp_path) == [2, 4, 6]
    assert_trees_equal(load_state(tmp_path, N), load_state(straight_dir, N))
    a, b = read_metrics(tmp_path), read_metrics(straight_dir)
    for s in (5, 6):
        for k in EXACT_KEYS + ("learning_rate",):
            assert a[s][k] == b[s][k], (s, k)


def test_corrupted_latest_checkpoint_falls_back(straight, tmp_path, caplog):
    """Truncate every data file of checkpoint 6: the rerun warns, restores step 4, retrains
    steps 5-6 and ends bitwise where the straight run ended."""
    straight_dir, _ = straight
    work = tmp_path / "run"
    shutil.copytree(straight_dir / "checkpoints", work / "checkpoints")
    reference = load_state(straight_dir, N)
    files = [
        f
        for f in glob.glob(str(work / "checkpoints" / "6" / "state" / "**" / "*"), recursive=True)
        if os.path.isfile(f) and "/d/" in f
    ]
    assert files
    for f in files:
        with open(f, "r+b") as fh:
            fh.truncate(0)
    with caplog.at_level(logging.WARNING):
        run(work, total_steps=N)
    messages = [r.getMessage() for r in caplog.records]
    assert any("checkpoint step 6 is unreadable" in m for m in messages)
    assert any("replacing the existing (unreadable) checkpoint of step 6" in m for m in messages)
    assert sorted(read_metrics(work)) == [5, 6]  # only steps 5, 6 were (re)trained
    assert_trees_equal(load_state(work, N), reference)


# A tiny model with dropout, so that a wrongly restored key changes the steps after resuming.
OLD_MODEL = dict(vocab_size=97, embedding_size=8, hidden_size=8, num_layers=2, num_heads=2,
                 intermediate_size=16, max_position_embeddings=16, hidden_dropout=0.1)  # fmt: skip


def test_checkpoint_with_a_raw_key_resumes(tmp_path):
    """A train-state checkpoint written before typed keys (its `rng` a raw uint32[2] key, as
    `jax.random.PRNGKey` made it) resumes: the key is wrapped on restore, and steps 5-6 after it
    are those of a run straight to 6 (same dropout masks). The fixture is checkpoint 4 of main at
    7b46bd0, written by

        git worktree add --detach /tmp/wt_old 7b46bd0 && cd /tmp/wt_old && \
        XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0" \
        JAX_PLATFORMS=cpu PYTHONPATH=.:tests python -c "
        from albert_jax import AlbertConfig; from trainer_worker import make_config, make_task
        from albert_jax.train.trainer import train
        m = AlbertConfig(vocab_size=97, embedding_size=8, hidden_size=8, num_layers=2,
            num_heads=2, intermediate_size=16, max_position_embeddings=16, hidden_dropout=0.1)
        c = make_config(total_steps=4, checkpoint_every=4, **{'optim.total_steps': 6})
        train(c, '/tmp/old_run', make_task(c, model=m).job())"
        cp -r /tmp/old_run/checkpoints/4 tests/fixtures/main_train_state/4
    """
    from albert_jax import AlbertConfig

    model = AlbertConfig(**OLD_MODEL)
    old, straight = tmp_path / "old", tmp_path / "straight"
    fixture = os.path.join(HERE, "fixtures", "main_train_state", "4")
    shutil.copytree(fixture, old / "checkpoints" / "4")
    saved = load_state(old, 4)
    assert saved["rng"].dtype == np.uint32 and saved["rng"].shape == (2,)
    # The batch unsplit (tensor=8): the dropout masks are then the global batch's, as they were
    # on the fixture's (8, 1, 1) mesh (a split batch folds each shard's index into its key).
    mesh = {"mesh_shape": (1, 1, 8)}
    config = make_config(total_steps=N, checkpoint_every=4, **mesh)
    task = make_task(config, model=model)
    ckpt = Checkpointer(str(old / "checkpoints"))
    try:  # restored as the typed key the step expects (a raw one would compile a second step)
        state, step = ckpt.restore_latest(
            compile_task(config, task.job()).abstract, task.train_iterator(0, 1)
        )
    finally:
        ckpt.close()
    assert step == 4 and jax.dtypes.issubdtype(state.rng.dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(state.rng), saved["rng"])
    for workdir in (old, straight):
        config = make_config(total_steps=N, checkpoint_every=4, **mesh)
        train(config, str(workdir), make_task(config, model=model).job())
    assert ckpt_steps(old) == [4, 6] and sorted(read_metrics(old)) == [5, 6]
    a, b = load_state(old, N), load_state(straight, N)
    assert np.array_equal(a["rng"], saved["rng"]) and np.array_equal(a["rng"], b["rng"])
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)
    rows, ref = read_metrics(old), read_metrics(straight)
    for s in (5, 6):
        np.testing.assert_allclose(rows[s]["loss"], ref[s]["loss"], rtol=1e-6)


def test_relative_workdir(tmp_path, monkeypatch):
    """The README passes a relative --workdir; orbax needs absolute paths, the trainer resolves."""
    monkeypatch.chdir(tmp_path)
    run("rel_run", total_steps=2, checkpoint_every=2, **{"optim.warmup_steps": 0})
    assert ckpt_steps(tmp_path / "rel_run") == [2]
    assert sorted(read_metrics(tmp_path / "rel_run")) == [1, 2]


# --------------------------------------------------------------------------- NaN


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    """Batch 2 (step 3) has infinite MLM weights: NonFiniteLossError names step 3, and the newest
    checkpoint on disk is step 2 with finite parameters."""
    config = make_config(total_steps=N)
    task = make_task(config, inf_at=2)
    with pytest.raises(
        NonFiniteLossError, match=r"loss is nan at step 3.*last good checkpoint \(step 2\)"
    ):
        train(config, str(tmp_path), task.job())
    assert ckpt_steps(tmp_path) == [2]
    state = load_state(tmp_path, 2)
    assert int(state["step"]) == 2
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(state["params"]))
    assert sorted(read_metrics(tmp_path)) == [1, 2]  # the NaN step was never logged


def test_nonfinite_loss_before_any_checkpoint_claims_none(tmp_path):
    config = make_config(total_steps=N)
    with pytest.raises(NonFiniteLossError, match=r"at step 1; .* No checkpoint was written"):
        train(config, str(tmp_path), make_task(config, inf_at=0).job())
    assert ckpt_steps(tmp_path) == []


def test_a_float16_model_is_refused_before_compiling():
    """However the run got float16 (its config's execution section, a task's own), `compile_task`
    refuses it with the one-line reason, for either network of a task."""
    for name in ("dtype", "param_dtype"):
        config = make_config(total_steps=N, **{f"execution.{name}": "float16"})
        task = make_task(config, model=trainer_worker.tiny_model_config())
        with pytest.raises(trainer.TrainConfigError, match="float16 cannot train: there is no"):
            compile_task(config, task.job())


# --------------------------------------------------------------------------- metrics output


def _tb_events(directory):
    """(tag, step, value) of every scalar in the TFRecord event files under `directory`."""
    from tensorboardX.proto import event_pb2

    out = []
    files = glob.glob(os.path.join(directory, "**", "events.out.tfevents.*"), recursive=True)
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            pos += 12  # length + its crc
            event = event_pb2.Event.FromString(data[pos : pos + length])
            pos += length + 4  # data + its crc
            for v in event.summary.value:
                out.append((v.tag, event.step, v.simple_value))
        assert pos == len(data), "truncated TFRecord"
    return files, out


def test_metrics_jsonl_and_tensorboard(straight):
    workdir, last = straight
    rows = read_metrics(workdir)
    assert sorted(rows) == list(range(1, N + 1))
    for s, row in rows.items():
        for k in METRIC_KEYS:
            assert k in row and np.isfinite(row[k]), (s, k)
        assert 0 <= row["mlm_accuracy"] <= 1 and 0 <= row["sop_accuracy"] <= 1
        assert row["step_time_s"] > 0 and row["mfu"] > 0
        np.testing.assert_allclose(row["loss"], row["mlm_loss"] + row["sop_loss"], rtol=1e-6)
        np.testing.assert_allclose(row["tokens_per_s"], BATCH * 16 / row["step_time_s"], rtol=1e-6)
    assert rows[1]["learning_rate"] == 0.0 and rows[3]["learning_rate"] > 0  # warmup of 2
    assert last["loss"] == rows[N]["loss"]

    files, events = _tb_events(os.path.join(workdir, "tensorboard"))
    assert files
    tags = {t for t, _, _ in events}
    for k in METRIC_KEYS:
        assert f"train/{k}" in tags, k
    by_tag_step = {(t, s): v for t, s, v in events}
    for s in range(1, N + 1):
        np.testing.assert_allclose(by_tag_step[("train/loss", s)], rows[s]["loss"], rtol=1e-6)


def test_metrics_reach_the_host_only_at_log_and_checkpoint_steps(straight, tmp_path, monkeypatch):
    """log_every=3, checkpoint_every=6: the trainer reads metrics off the device at steps 3 and
    6 only (each time the interval's losses, all checked, and the step's metrics), and each row
    holds its own step's metrics: those of the run that logged every step."""
    straight_dir, _ = straight
    reads, device_get = [], jax.device_get

    def spy(tree):
        if sys._getframe(1).f_code.co_filename == loop.__file__:
            reads.append(tree)
        return device_get(tree)

    monkeypatch.setattr(jax, "device_get", spy)
    run(tmp_path, total_steps=N, log_every=3, checkpoint_every=6)
    rows, ref = read_metrics(tmp_path), read_metrics(straight_dir)
    assert sorted(rows) == [3, 6] and ckpt_steps(tmp_path) == [6]
    for s in (3, 6):
        for k in EXACT_KEYS + ("learning_rate",):
            assert rows[s][k] == ref[s][k], (s, k)
        assert rows[s]["step_time_s"] > 0
    assert len(reads) == 4 and [len(r) for r in reads[::2]] == [3, 3]


def test_nonfinite_loss_between_log_steps_names_its_step(tmp_path):
    """Batch 1 (step 2) is poisoned and the first read is at step 3: the error names step 2."""
    config = make_config(total_steps=N, log_every=3, checkpoint_every=6)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 2; .*No checkpoint was"):
        train(config, str(tmp_path), make_task(config, inf_at=1).job())
    assert ckpt_steps(tmp_path) == [] and read_metrics(tmp_path) == {}


@pytest.mark.slow
def test_no_mfu_without_peak_flops(tmp_path):
    """peak_flops_per_device = 0 (default): no mfu; total_steps 1 means one step only."""
    run(tmp_path, total_steps=1, **{"optim.warmup_steps": 0})
    rows = read_metrics(tmp_path)
    assert sorted(rows) == [1] and "mfu" not in rows[1] and "tokens_per_s" in rows[1]
    assert ckpt_steps(tmp_path) == [1]

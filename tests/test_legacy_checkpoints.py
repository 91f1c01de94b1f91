"""Checkpoints written before every grouped leaf carried its group axis (up to 54ec26f) load onto
today's tree (`albert_jax.checkpoints.legacy`): a G = 1 leaf gains its axis, a per-layer list of
an unrolled run's train state is stacked, values unchanged. The fixtures in
tests/fixtures/legacy/ were written by the old code (`make_legacy.py` there says how): a model
with attention shared (G = 1) and the FFN not (G = 2), unrolled."""

from __future__ import annotations

import json
import os
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import traverse_util
from trainer_worker import make_config, make_task

from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.train_state import Checkpointer
from albert_jax.model.config import EXECUTION_KEYS
from albert_jax.model.heads import build_model
from albert_jax.train import workdir
from albert_jax.train.trainer import compile_task, train

LEGACY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "legacy")
ATTENTION, FFN = "encoder/attention/query/kernel", "encoder/ffn/output/kernel"


def raw(path):
    """A checkpoint's tree as it was written (per-layer lists included), on the host."""
    return jax.tree_util.tree_map(np.asarray, ocp.StandardCheckpointer().restore(path))


def flat(tree):
    return traverse_util.flatten_dict(tree, sep="/")


def assert_canonical(new, old):
    """`new` is `old` on today's tree: every attention leaf gains its G = 1 axis, every FFN
    leaf (a per-layer list in an unrolled train state) is [2, ...]; all values equal."""
    new, old = flat(new), flat(old)
    assert new.keys() == old.keys()
    for path, value in new.items():
        was = old[path]
        if path.startswith("encoder/attention/"):
            assert value.shape[0] == 1 and value.shape[1:] == np.shape(was), path
            want = np.asarray(was)[None]
        elif path.startswith("encoder/ffn/"):
            want = np.stack(was) if isinstance(was, list) else np.asarray(was)
            assert value.shape[0] == 2, path
        else:
            want = np.asarray(was)
        np.testing.assert_array_equal(np.asarray(value), want, err_msg=path)


def test_a_legacy_model_checkpoint_loads_on_todays_tree(tmp_path):
    """Its config.json, written when AlbertConfig held the execution fields (scan_layers, dtype,
    ...), loads without them; saved again, the config.json holds none of them."""
    path = os.path.join(LEGACY, "model")
    with open(os.path.join(path, "config.json")) as f:
        assert EXECUTION_KEYS <= set(json.load(f))  # the fixture is of the old config.json
    config, params = checkpoint.load(path)
    assert (config.attention_groups, config.ffn_groups) == (1, 2)
    checkpoint.save(str(tmp_path / "again"), config, params)
    with open(tmp_path / "again" / "config.json") as f:
        saved = json.load(f)
    assert not set(saved) & EXECUTION_KEYS and saved["ffn_groups"] == 2
    assert checkpoint.load(str(tmp_path / "again"))[0] == config
    old = raw(os.path.join(path, "params"))
    assert np.ndim(flat(old)[ATTENTION]) == 2  # the fixture is of the old layout
    assert_canonical(params, old)
    ids = np.arange(1, 9, dtype=np.int32)[None]
    out = build_model(config).apply({"params": params}, ids)  # the model runs on it
    assert np.all(np.isfinite(out.mlm_logits))


def test_a_legacy_workdir_converts_on_todays_tree():
    """Its config.json's model section still holds scan_layers (an execution key): it loads."""
    with open(os.path.join(LEGACY, "workdir", "config.json")) as f:
        assert json.load(f)["model"]["scan_layers"] is False
    src = workdir.load_workdir(os.path.join(LEGACY, "workdir"))
    assert (src.config.attention_groups, src.config.ffn_groups) == (1, 2)
    old = raw(os.path.join(LEGACY, "workdir", "checkpoints", "2", "state"))
    assert isinstance(flat(old["params"])[FFN], list)  # written per layer
    assert src.step == 2
    assert_canonical(src.params, old["params"])


def test_a_legacy_unrolled_train_state_resumes_scanned(tmp_path):
    """The legacy state (2 unrolled steps) restores onto today's tree, optimizer moments
    included, and 2 more steps, scanned, end where 4 unrolled steps straight end."""
    config_model = workdir.read_config(os.path.join(LEGACY, "workdir"))
    old = raw(os.path.join(LEGACY, "workdir", "checkpoints", "2", "state"))
    work, straight = tmp_path / "resumed", tmp_path / "straight"
    shutil.copytree(os.path.join(LEGACY, "workdir", "checkpoints"), work / "checkpoints")
    run = make_config(total_steps=4, checkpoint_every=2, **{"execution.scan_layers": False})
    task = make_task(run, model=config_model)
    ckpt = Checkpointer(str(work / "checkpoints"))
    try:
        state, step = ckpt.restore_latest(
            compile_task(run, task.job()).abstract, task.train_iterator(0, 1)
        )
    finally:
        ckpt.close()
    assert step == 2
    host = jax.device_get(state)
    assert_canonical(host.params, old["params"])
    mu = next(s for s in jax.tree_util.tree_leaves(host.opt_state, is_leaf=_is_adam) if _is_adam(s))
    old_mu = next(s for s in old["opt_state"][1] if isinstance(s, dict) and "mu" in s)["mu"]
    assert_canonical(mu.mu, old_mu)

    scanned = make_config(total_steps=4, checkpoint_every=2, **{"execution.scan_layers": True})
    train(scanned, str(work), make_task(scanned, model=config_model).job())
    train(run, str(straight), make_task(run, model=config_model).job())
    a, b = (raw(str(d / "checkpoints" / "4" / "state")) for d in (work, straight))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)


def _is_adam(x):
    return hasattr(x, "mu") and hasattr(x, "nu")

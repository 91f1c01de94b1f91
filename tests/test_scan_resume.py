"""Scan vs unrolled is an execution detail: a run checkpointed with one and resumed with the other
ends where an uninterrupted run ends (the train state's tree, parameters and optimizer state, is
the same for both). The synthetic task of tests/trainer_worker.py on a model with a shared
attention block (G = 1) and unshared FFN (G = L)."""

from __future__ import annotations

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from trainer_worker import make_config, make_task, tiny_model_config

from albert_jax.train.trainer import train

N = 6


def state_at(workdir, step=N):
    path = str(workdir / "checkpoints" / str(step) / "state")
    return jax.tree_util.tree_map(np.asarray, ocp.StandardCheckpointer().restore(path))


def run(workdir, scan: bool, steps: int):
    overrides = {"optim.total_steps": N, "execution.scan_layers": scan}
    config = make_config(total_steps=steps, checkpoint_every=3, **overrides)
    model = tiny_model_config().replace(attention_groups=1)
    model = model.replace(ffn_groups=model.num_layers)
    train(config, str(workdir), make_task(config, model=model).job())


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("straight")
    run(workdir, scan=True, steps=N)
    return state_at(workdir)


@pytest.mark.parametrize("first", [True, False], ids=["scan_then_unrolled", "unrolled_then_scan"])
def test_resume_across_scan_and_unrolled_equals_the_straight_run(straight, tmp_path, first):
    run(tmp_path, scan=first, steps=3)
    run(tmp_path, scan=not first, steps=N)
    resumed = state_at(tmp_path)
    assert jax.tree.structure(resumed) == jax.tree.structure(straight)
    kernel = resumed["params"]["encoder"]["attention"]["query"]["kernel"]
    assert kernel.shape[0] == 1  # the shared block kept its G = 1 axis throughout
    jax.tree_util.tree_map_with_path(
        lambda p, x, y: np.testing.assert_allclose(
            x, y, rtol=1e-5, atol=1e-6, err_msg=jax.tree_util.keystr(p)
        ),
        resumed,
        straight,
    )
    at_3 = state_at(tmp_path, 3)["params"]  # the resumed steps moved the parameters
    moved = jax.tree.map(lambda x, y: np.abs(x - y).max(), resumed["params"], at_3)
    assert max(jax.tree.leaves(moved)) > 1e-4

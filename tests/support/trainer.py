"""The trainer on the synthetic task of tests/trainer_worker.py as the trainer, fault and ELECTRA
tests run it: a short run (the `straight` fixture's, tests/conftest.py, is N steps), its
checkpointed steps and states, its metrics, and exact comparison of states."""

import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from trainer_worker import make_config, make_task

from albert_jax.train.trainer import train

N = 6  # steps of the reference run; checkpoints every 2
# Values that must reproduce exactly on resume (timings do not).
EXACT_KEYS = ("loss", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy", "grad_norm")


def read_metrics(workdir):
    """{step: row} of the train rows of metrics.jsonl (a later row for a step wins)."""
    rows = {}
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row["split"] == "train":
                rows[row["step"]] = row
    return rows


def ckpt_steps(workdir):
    d = os.path.join(workdir, "checkpoints")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit())


def load_state(workdir, step):
    """The saved TrainState as a dict of host numpy arrays."""
    path = os.path.join(workdir, "checkpoints", str(step), "state")
    return jax.tree_util.tree_map(np.asarray, ocp.StandardCheckpointer().restore(path))


def assert_trees_equal(a, b):
    la, ta = jax.tree_util.tree_flatten_with_path(a)
    lb, tb = jax.tree_util.tree_flatten_with_path(b)
    assert ta == tb
    for (path, x), (_, y) in zip(la, lb, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape, jax.tree_util.keystr(path)
        assert np.array_equal(x, y), f"{jax.tree_util.keystr(path)} differs"


def run(workdir, **overrides):
    config = make_config(**overrides)
    return train(config, str(workdir), make_task(config).job())

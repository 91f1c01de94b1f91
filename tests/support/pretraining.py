"""A real pretraining run at toy scale, as the workdir, ELECTRA and sweep tests start it: the
synthetic model (albert-tiny cut down, two groups), a config file over a corpus of made-up words,
and reading the trainer's saved parameters back bit for bit."""

import os

import jax
import numpy as np
import orbax.checkpoint as ocp

MODEL = dict(  # config.model of the synthetic runs: albert-tiny cut down, two groups
    preset="albert-tiny", layout="groups:2", embedding_size=16, hidden_size=32, num_heads=2,
    intermediate_size=64, max_position_embeddings=32, num_layers=4, vocab_size=120,
)  # fmt: skip
SYLLABLES = "ka lo mi ne su ta ri po ve zu ba de fi go hu".split()
STEPS = 4  # checkpoints at 2 and 4
# A pretraining config file: .format(corpus=PATH, model=MODEL without vocab_size, steps=STEPS).
CONFIG = """
import ml_collections

from albert_jax.configs.pretrain.cpu_small import get_config as cpu_small


def get_config(arg=None):
    c = cpu_small()
    c.data.update(input_files={corpus!r}, input_format="text", corpus_name="tiny")
    c.data.update(vocab_size=100, character_coverage=1.0, max_seq_length=32, max_predictions=5)
    c.data.update(global_batch_size=8, worker_count=0)
    c.model = ml_collections.ConfigDict({model!r})
    c.model.vocab_size = c.data.get_ref("vocab_size")
    c.total_steps = {steps}
    c.optim.warmup_steps = 1
    c.checkpoint_every = 2
    c.keep_checkpoints = 5
    c.eval_every = 0
    c.log_every = 1
    c.progress_bar = False
    return c
"""


def write_corpus(path, docs=120, sentences=6, seed=0):
    """Sentences of made-up words (400 of them): enough variety for a 100-piece vocabulary."""
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(SYLLABLES, int(rng.integers(1, 4)))) for _ in range(400)]
    with open(path, "w") as f:
        for _ in range(docs):
            for _ in range(sentences):
                n = int(rng.integers(4, 10))
                f.write(" ".join(rng.choice(words, n)).capitalize() + ".\n")
            f.write("\n")


def trainer_params(work, step):
    """The trainer's saved parameters, read as a whole TrainState with a target (as the trainer
    restores), independently of the converter's partial read."""
    path = os.path.join(work, "checkpoints", str(step), "state")
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    with ocp.StandardCheckpointer() as ckptr:
        meta = ckptr.metadata(path).item_metadata.tree
        target = jax.tree_util.tree_map(
            lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=cpu), meta
        )
        state = ckptr.restore(path, target)
    return jax.tree_util.tree_map(np.asarray, state["params"])


def assert_bitwise_equal(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for (path, x), y in zip(
        jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves(b), strict=True
    ):
        assert x.dtype == y.dtype and x.shape == y.shape, jax.tree_util.keystr(path)
        assert np.array_equal(x, y), jax.tree_util.keystr(path)

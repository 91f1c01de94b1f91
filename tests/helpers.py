"""Small configs and inputs shared by the model tests."""

import jax
import jax.numpy as jnp
import numpy as np

from albert_jax import AlbertConfig


def tiny_config(layout="all", **kw) -> AlbertConfig:
    base = dict(
        vocab_size=97,
        embedding_size=16,
        hidden_size=32,
        num_layers=6,
        num_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
    )
    base.update(kw)
    return AlbertConfig(**base).with_layout(layout)


def tiny_batch(batch=2, seq=12, vocab=97, preds=3, seed=0):
    """Random ids with padding at the end of the second row, two segments, masked positions."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[1, seq - 4 :] = 0
    ids[1, seq - 4 :] = 0
    types = np.zeros((batch, seq), np.int32)
    types[:, seq // 2 :] = 1
    positions = np.sort(rng.choice(np.arange(1, seq - 4), (batch, preds)), axis=1).astype(np.int32)
    return {
        "input_ids": jnp.asarray(ids),
        "token_type_ids": jnp.asarray(types),
        "attention_mask": jnp.asarray(mask),
        "masked_positions": jnp.asarray(positions),
    }


def random_params(model, seed=0, scale_ln=True):
    """Initialized params with LayerNorm and biases randomized too, so every term is exercised."""
    from albert_jax.model.albert import init_params

    params = init_params(model, jax.random.key(seed))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    key = jax.random.key(seed + 1)
    out = []
    for i, (path, leaf) in enumerate(leaves):
        name = jax.tree_util.keystr(path)
        noise = 0.1 * jax.random.normal(jax.random.fold_in(key, i), leaf.shape)
        if "scale" in name:
            leaf = 1.0 + noise
        elif "bias" in name:
            leaf = noise
        out.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, out)


def quick_finetune(c, steps: int, **kw):
    """A fine-tuning config made short for tests: batches of 8 (the 8 fake host devices), a few
    steps, evaluation every 2, logging every step, no progress bar; `kw` overrides on top."""
    c.batch_size = c.eval_batch_size = 8
    c.total_steps = steps
    c.eval_every = 2
    c.log_every = 1
    c.progress_bar = False
    c.optim.learning_rate = 1e-3
    c.update(kw)
    return c


def split_files_config(task_type: str, init: str, d, ext: str, steps: int, task=None, **kw):
    """A short fine-tuning config (`quick_finetune`) for `task_type` from `init`, reading
    d/{train,dev,test}.EXT, with `task` overrides of config.task."""
    from albert_jax.configs.finetune.common import get_common

    c = get_common(task_type)
    c.init = init
    c.task.update({split: str(d / f"{split}.{ext}") for split in ("train", "dev", "test")})
    c.task.update(task or {})
    return quick_finetune(c, steps, **kw)

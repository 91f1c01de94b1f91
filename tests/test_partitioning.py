"""FSDP / tensor-parallel sharding on 8 fake CPU devices gives the single-device numbers."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tiny_batch, tiny_config

from albert_jax import AlbertForPreTraining
from albert_jax.model.losses import mlm_loss, sop_loss
from albert_jax.train.partitioning import DEFAULT_RULES, batch_sharding, init_sharded, make_mesh


def loss_fn(cfg, params, batch):
    out = AlbertForPreTraining(cfg).apply({"params": params}, **batch)
    labels = batch["input_ids"][:, :3]
    return mlm_loss(out.mlm_logits, labels, jnp.ones_like(labels)) + sop_loss(
        out.sop_logits, batch["input_ids"][:, 0] % 2
    )


@pytest.mark.parametrize("mesh_shape", [(2, 4, 1), (1, 4, 2)])
@pytest.mark.parametrize("layout", ["all", "groups:2"])
def test_sharded_forward_backward_equals_single_device(mesh_shape, layout):
    assert jax.device_count() == 8, "conftest sets 8 fake CPU devices"
    cfg = tiny_config(layout)
    model = AlbertForPreTraining(cfg)
    mesh = make_mesh(mesh_shape)
    params, shardings = init_sharded(model, jax.random.key(0), mesh)

    # Parameters really are split: FSDP over the model width, tensor over the FFN width.
    kernel = params["encoder"]["ffn"]["intermediate"]["kernel"]
    assert kernel.sharding.spec == shardings["encoder"]["ffn"]["intermediate"]["kernel"].spec
    assert tuple(kernel.sharding.spec) == (None, "fsdp", "tensor")  # [G, H, I], G = 1 included
    assert len(kernel.addressable_shards) == 8
    assert kernel.addressable_shards[0].data.size == kernel.size // (4 * mesh_shape[2])
    # vocab 97 does not divide over 'tensor': that dimension stays replicated instead of failing.
    if mesh_shape[2] > 1:
        assert params["embeddings"]["word_embeddings"].sharding.spec[0] is None

    batch = tiny_batch(batch=8)
    sharded_batch = {k: jax.device_put(v, batch_sharding(mesh)) for k, v in batch.items()}
    step = jax.jit(
        jax.value_and_grad(lambda p, b: loss_fn(cfg, p, b)),
        in_shardings=(shardings, batch_sharding(mesh)),
        out_shardings=(None, shardings),
    )
    with jax.set_mesh(mesh), nn.logical_axis_rules(DEFAULT_RULES):
        loss, grads = step(params, sharded_batch)

    host_params = jax.tree_util.tree_map(
        lambda x: jax.device_put(np.asarray(x), jax.devices()[0]), params
    )
    ref_loss, ref_grads = jax.jit(jax.value_and_grad(lambda p, b: loss_fn(cfg, p, b)))(
        host_params, batch
    )
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(np.asarray(a), b, atol=1e-6, rtol=1e-5),
        grads,
        ref_grads,
    )
    assert grads["encoder"]["ffn"]["intermediate"]["kernel"].sharding.spec == kernel.sharding.spec


def test_make_mesh_checks_the_device_count():
    assert make_mesh((2, -1, 1)).shape == {"data": 2, "fsdp": 4, "tensor": 1}
    with pytest.raises(ValueError, match="does not cover the 8 devices"):
        make_mesh((3, 2, 1))

"""The Flax model against an independent NumPy forward pass, and scan vs unrolled layers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import random_params, tiny_batch, tiny_config
from numpy_reference import gelu_tanh
from support.reference import (
    LAYOUT_GROUPS,
    check_against_numpy,
    numpy_forward,
    reference_params,
    rel_err,
)

from albert_jax import AlbertForPreTraining, AlbertModel
from albert_jax.model.albert import ACTIVATIONS
from albert_jax.model.config import Execution
from albert_jax.model.losses import mlm_loss, sop_loss

DEFAULT = Execution()


def apply(config, params, batch, rngs=None, execution=DEFAULT, **kw):
    """Jitted apply (eager dispatch of every op is far slower than compiling these tiny models)."""
    model = AlbertForPreTraining(config, execution)
    fn = jax.jit(lambda p, b, r: model.apply({"params": p}, **b, rngs=r, **kw))
    return fn(params, batch, rngs)


@pytest.mark.parametrize("layout", list(LAYOUT_GROUPS))
def test_matches_numpy_reference(layout):
    cfg = tiny_config(layout)
    params = reference_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    out = apply(cfg, params, batch, output_hidden_states=True)
    reference = numpy_forward(cfg, layout, params, batch)
    check_against_numpy(cfg, layout, out, reference)
    assert np.mean(np.abs(reference[1]) < 0.99) > 0.5  # the pooler's tanh is mostly not saturated


def test_all_padding_row_is_a_constant_shift():
    """With every key padded, the additive -10000 bias shifts all logits alike and softmax ignores
    it: the row equals the unmasked row up to f32 rounding of (logit - 10000) (ulp ~1e-3; measured
    relative error 1.2e-5, tolerance 1e-4). A bias that swamps the logits (-1e9: uniform
    attention) or -inf (NaN) fails this."""
    cfg = tiny_config()
    params = reference_params(AlbertModel(cfg))
    ids = tiny_batch()["input_ids"][:1]
    run = jax.jit(lambda m: AlbertModel(cfg).apply({"params": params}, ids, attention_mask=m))
    full, padded = run(jnp.ones_like(ids)), run(jnp.zeros_like(ids))
    err = rel_err(padded.sequence_output, np.asarray(full.sequence_output, np.float64))
    print("all-padding row vs unmasked", err)
    assert err < 1e-4


def test_gelu_new_is_the_tanh_form_and_gelu_is_erf():
    x = np.linspace(-4, 4, 101)
    np.testing.assert_allclose(ACTIVATIONS["gelu_new"](x), gelu_tanh(x), atol=1e-6)
    # The two forms differ by up to ~1e-3 around |x| ~ 2; the erf one must be the exact GELU.
    from math import erf, sqrt

    exact = np.array([0.5 * v * (1 + erf(v / sqrt(2))) for v in x])
    np.testing.assert_allclose(ACTIVATIONS["gelu"](x), exact, atol=1e-6)
    assert np.max(np.abs(exact - gelu_tanh(x))) > 1e-4


def test_padding_is_an_additive_minus_10000_bias():
    """A padded key contributes exp(-10000)-weighted (i.e. nothing); its content cannot leak."""
    cfg = tiny_config()
    params = random_params(AlbertModel(cfg))
    batch = tiny_batch()
    changed = dict(batch)
    ids = np.asarray(batch["input_ids"]).copy()
    ids[1, -4:] = 42  # change padded tokens only
    changed["input_ids"] = jnp.asarray(ids)
    model = AlbertModel(cfg)
    run = jax.jit(
        lambda ids: model.apply(
            {"params": params}, ids, batch["token_type_ids"], batch["attention_mask"]
        )
    )
    a, b = run(batch["input_ids"]), run(changed["input_ids"])
    np.testing.assert_allclose(a.sequence_output[:, :-4], b.sequence_output[:, :-4], atol=1e-6)
    assert not np.allclose(a.sequence_output[1, -4:], b.sequence_output[1, -4:])


def test_mlm_decoder_is_tied_to_word_embeddings():
    """Moving word-table row 7 (a token absent from the input) moves exactly logit 7: the decoder
    reads the word table, and no separate decoder matrix exists."""
    cfg = tiny_config()
    params = random_params(AlbertForPreTraining(cfg))
    batch = dict(tiny_batch())
    ids = np.asarray(batch["input_ids"])
    batch["input_ids"] = jnp.asarray(np.where(ids == 7, 8, ids))  # row 7 only reaches the decoder
    assert set(params["mlm"]) == {"transform", "LayerNorm", "output_bias"}
    base = apply(cfg, params, batch).mlm_logits
    bumped = jax.tree_util.tree_map(lambda x: x, params)
    bumped["embeddings"]["word_embeddings"] = params["embeddings"]["word_embeddings"].at[7].add(1.0)
    diff = np.asarray(apply(cfg, bumped, batch).mlm_logits - base)
    assert np.all(np.abs(diff[..., 7]) > 1e-3)
    np.testing.assert_allclose(np.delete(diff, 7, axis=-1), 0.0, atol=1e-6)


def test_mlm_all_positions_equals_gathered():
    cfg = tiny_config("groups:2")
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    gathered = apply(cfg, params, batch).mlm_logits
    everywhere = dict(batch)
    del everywhere["masked_positions"]
    full = apply(cfg, params, everywhere).mlm_logits
    assert full.shape == (2, 12, cfg.vocab_size)
    expect = np.take_along_axis(
        np.asarray(full), np.asarray(batch["masked_positions"])[..., None], 1
    )
    np.testing.assert_allclose(gathered, expect, atol=1e-6)


def _loss(
    config, params, batch, deterministic=True, rng=None, with_outputs=False, execution=DEFAULT
):
    out = AlbertForPreTraining(config, execution).apply(
        {"params": params},
        **batch,
        deterministic=deterministic,
        output_hidden_states=with_outputs,
        rngs=None if rng is None else {"dropout": rng},
    )
    labels = batch["input_ids"][:, :3]
    loss = mlm_loss(out.mlm_logits, labels, jnp.ones_like(labels)) + sop_loss(
        out.sop_logits, jnp.array([0, 1])
    )
    return (loss, out) if with_outputs else loss


def grad(config, **kw):
    return jax.jit(jax.grad(functools.partial(_loss, config, **kw)))


@pytest.mark.parametrize("layout", ["all", "attention", "ffn", "none", "groups:2", "groups:3"])
def test_scan_and_unrolled_agree_on_outputs_and_gradients(layout):
    """Same outputs and gradients to f32 rounding (atol 1e-6, rtol 1e-6: values reach ~3, where an
    ulp is 2.4e-7 and XLA fuses the loop and the unrolled graph differently)."""
    cfg = tiny_config(layout)
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    results = []
    for scan in (True, False):
        ex = Execution(scan_layers=scan)
        fn = jax.value_and_grad(
            functools.partial(_loss, cfg, with_outputs=True, execution=ex), has_aux=True
        )
        results.append(jax.jit(fn)(params, batch))
    ((_, o1), g1), ((_, o2), g2) = results
    close = functools.partial(np.testing.assert_allclose, atol=1e-6, rtol=1e-6)
    close(o1.sequence_output, o2.sequence_output)
    close(o1.mlm_logits, o2.mlm_logits)
    jax.tree_util.tree_map(close, o1.hidden_states, o2.hidden_states)
    jax.tree_util.tree_map(close, g1, g2)
    # Every group of every encoder leaf receives gradient (each group is used by some layer).
    for block, groups in (("attention", cfg.attention_groups), ("ffn", cfg.ffn_groups)):
        for leaf in jax.tree_util.tree_leaves(g1["encoder"][block]):
            per_group = np.abs(np.asarray(leaf)).reshape(groups, -1).max(-1)
            assert np.all(per_group > 0)


@pytest.mark.slow
def test_dropout_scan_unrolled_and_remat_agree():
    """With dropout on, per-layer keys depend only on the layer index: scan == unrolled, and remat
    policies change memory, not numbers."""
    cfg = tiny_config("groups:3", hidden_dropout=0.2, attention_dropout=0.2)
    params = random_params(AlbertForPreTraining(cfg))
    batch, rng = tiny_batch(), jax.random.key(3)
    ref = grad(cfg, deterministic=False, rng=rng)(params, batch)
    for changes in ({"scan_layers": False}, {"remat": "full"}, {"remat": "save_dots"}):
        ex = Execution(**changes)
        g = grad(cfg, deterministic=False, rng=rng, execution=ex)(params, batch)
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), ref, g)
    det = grad(cfg)(params, batch)
    assert not np.allclose(det["pooler"]["kernel"], ref["pooler"]["kernel"])


def test_dropout_differs_between_layers_and_keys():
    cfg = tiny_config(hidden_dropout=0.3)
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    run = lambda k: apply(
        cfg, params, batch, deterministic=False, rngs={"dropout": jax.random.key(k)}
    )
    a, b = run(0), run(1)
    assert not np.allclose(a.sequence_output, b.sequence_output)
    np.testing.assert_array_equal(a.sequence_output, run(0).sequence_output)


def test_bfloat16_compute_tracks_float32():
    cfg = tiny_config("groups:2")
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    f32 = apply(cfg, params, batch)
    bf16 = apply(cfg, params, batch, execution=Execution(dtype="bfloat16"))
    assert bf16.sequence_output.dtype == jnp.bfloat16
    assert bf16.mlm_logits.dtype == jnp.float32  # logits for the loss stay float32
    assert jax.tree_util.tree_leaves(params)[0].dtype == jnp.float32
    np.testing.assert_allclose(
        bf16.sequence_output.astype(np.float32), f32.sequence_output, atol=0.1
    )
    np.testing.assert_allclose(bf16.mlm_logits, f32.mlm_logits, atol=0.15)


def test_explicit_attention_matches_fused_kernel():
    from albert_jax.model.albert import explicit_attention

    k = jax.random.split(jax.random.key(0), 3)
    q, kk, v = (jax.random.normal(x, (2, 5, 3, 4)) for x in k)
    mask = jnp.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], jnp.float32)
    bias = (1 - mask[:, None, None, :]) * -10000.0
    fused = jax.nn.dot_product_attention(q, kk, v, bias=bias)
    explicit = explicit_attention(q, kk, v, bias, 0.0, None)
    np.testing.assert_allclose(fused, explicit, atol=1e-6)


def test_sequence_longer_than_positions_is_a_clear_error():
    cfg = tiny_config()
    params = random_params(AlbertModel(cfg))
    ids = jnp.zeros((1, cfg.max_position_embeddings + 1), jnp.int32)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        AlbertModel(cfg).apply({"params": params}, ids)


def _bf16_round(a):
    return np.asarray(jnp.asarray(a, jnp.bfloat16).astype(jnp.float32), np.float64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernel_spec", ["kn", "nk"])
@pytest.mark.parametrize("lead", [(7,), (2, 5)])
def test_matmul_and_its_gradient_are_the_products_of_the_dtype_operands(dtype, kernel_spec, lead):
    """`model.matmul`'s hand-written gradient: y, dx and dkernel equal the float64 products of the
    operands (and the cotangent) rounded to the compute dtype, to float32 accumulation; each
    gradient in its operand's dtype (the float32 kernel's stays float32)."""
    from albert_jax.model.albert import matmul

    K, N = 24, 40
    rng = np.random.default_rng(0)
    x = rng.standard_normal((*lead, K)).astype(np.float32)
    kernel = rng.standard_normal((K, N) if kernel_spec == "kn" else (N, K)).astype(np.float32)
    g = rng.standard_normal((*lead, N)).astype(np.float32)
    y, vjp = jax.vjp(lambda a, b: matmul(a, b, jnp.dtype(dtype), kernel_spec), x, kernel)
    dx, dk = vjp(jnp.asarray(g))
    r = _bf16_round if dtype == "bfloat16" else lambda a: np.asarray(a, np.float64)
    w = r(kernel) if kernel_spec == "kn" else r(kernel).T  # [K, N]
    xr, gr = r(x).reshape(-1, K), r(g).reshape(-1, N)
    want_dw = xr.T @ gr
    assert y.dtype == dx.dtype == dk.dtype == jnp.float32
    close = functools.partial(np.testing.assert_allclose, rtol=2e-6, atol=2e-6 * np.sqrt(K * N))
    close(np.asarray(y).reshape(-1, N), xr @ w)
    close(np.asarray(dx).reshape(-1, K), gr @ w.T)
    close(np.asarray(dk), want_dw if kernel_spec == "kn" else want_dw.T)


def test_bfloat16_gradients_track_float32_scanned_and_unrolled():
    """The bf16 train step's gradient runs on this backend (a bf16 x bf16 -> f32 dot in a form
    XLA's CPU runtime cannot execute fails here) and tracks f32's in both encoder forms: every
    leaf within 10 % (relative norm; measured: encoder and embeddings at most 2.2 %, the SOP
    head's 4.7 %, the pooler bias's 6.4 %), but the key bias, whose exact
    gradient is zero (softmax ignores a per-row shift), so both are rounding noise."""
    cfg = tiny_config("none")
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    ref = grad(cfg)(params, batch)
    for scan in (True, False):
        g = grad(cfg, execution=Execution(dtype="bfloat16", scan_layers=scan))(params, batch)
        for (path, a), b in zip(
            jax.tree_util.tree_leaves_with_path(g), jax.tree_util.tree_leaves(ref), strict=True
        ):
            assert a.dtype == jnp.float32
            if "'key'" in jax.tree_util.keystr(path) and "bias" in jax.tree_util.keystr(path):
                continue
            assert np.linalg.norm(a - b) / np.linalg.norm(b) < 0.1, jax.tree_util.keystr(path)


@pytest.mark.parametrize("attention", ["explicit", "fused"])
@pytest.mark.parametrize("scan", [True, False])
def test_save_dots_keeps_every_matmul_output_and_only_those(scan, attention):
    """remat="save_dots" keeps the 8 matmul outputs of each layer (q, k, v, logits, context,
    attention output, FFN in and out) for the backward pass; "full" keeps none of them. The fused
    kernel's logits stay inside it: 7."""
    from jax._src.ad_checkpoint import saved_residuals  # what jax.checkpoint's docs print

    L, dots = 6, 8 if attention == "explicit" else 7

    def kept(remat):
        cfg = tiny_config("none")
        model = AlbertForPreTraining(
            cfg, Execution(remat=remat, scan_layers=scan, attention_impl=attention)
        )
        params = random_params(model)
        batch = tiny_batch()
        f = lambda p: model.apply({"params": p}, **batch).mlm_logits.sum()
        res = saved_residuals(f, params)
        if scan:  # the loop's saved values: one [L, ...] array each (the 8 dots + the carry)
            return sum(1 for aval, why in res if "output of scan" in why and aval.shape[0] == L)
        return sum(1 for _, why in res if "named 'dot'" in why)

    assert kept("save_dots") == (dots + 1 if scan else dots * L)
    assert kept("full") == (1 if scan else 0)

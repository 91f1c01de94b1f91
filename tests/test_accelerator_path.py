"""The accelerator path, run on CPU: fused attention (`jax.nn.dot_product_attention`) and the
matmuls' plain autodiff gradient (`matmul_grad="autodiff"`), which `auto` picks off CPU only,
against the float64 NumPy reference (outputs, and every parameter's gradient as a central
difference of it) and against the CPU path (explicit attention, the hand-written gradient)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tiny_batch, tiny_config
from support.reference import LAYOUT_GROUPS, check_against_numpy, numpy_forward, reference_params

from albert_jax import AlbertForPreTraining, AlbertModel
from albert_jax.model import albert
from albert_jax.model.albert import matmul, resolve_attention, resolve_matmul_grad
from albert_jax.model.config import Execution

ACCELERATOR = dict(attention_impl="fused", matmul_grad="autodiff")
CPU_PATH = dict(attention_impl="explicit", matmul_grad="custom")
OUTPUTS = ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")


def weights(outputs, seed=1):
    """Fixed random weights of each output: the scalar loss is their dot product with it, so its
    gradient is the vector-Jacobian product of all four outputs at once."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(np.shape(o)) for o in outputs]


def linear_loss(outputs, w):
    return sum(jnp.vdot(jnp.asarray(wi, jnp.float32), o) for wi, o in zip(w, outputs, strict=True))


def value_and_grad(cfg, batch, w, execution):
    """Jitted params -> ((loss, outputs), gradient) of the pretraining model run as `execution`."""

    def loss(params):
        out = AlbertForPreTraining(cfg, execution).apply(
            {"params": params}, **batch, output_hidden_states=True
        )
        return linear_loss([getattr(out, k) for k in OUTPUTS], w), out

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


def numpy_loss(cfg, layout, params, batch, w):
    seq, pooled, mlm, sop, _ = numpy_forward(cfg, layout, params, batch)
    return sum(float(np.vdot(wi, o)) for wi, o in zip(w, (seq, pooled, mlm, sop), strict=True))


def check_gradient_by_differences(cfg, layout, params, batch, w, grads, h=1e-5):
    """For every leaf, the gradient's derivative along a random direction against a central
    difference of the float64 NumPy loss along it. Error is taken relative to the largest
    directional derivative: the key bias's true gradient is 0 (softmax ignores a per-row shift),
    so its own derivative is rounding noise. Measured over the 7 layouts: at most 1.6e-5, on the
    embedding tables (whose LayerNorm divides by their small spread; the CPU path: 1.3e-5);
    the other leaves at most ~1e-6. Tolerance 5e-5."""
    rng = np.random.default_rng(2)
    p64 = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(p64)
    ours, diffs = {}, {}
    for i, ((path, leaf), g) in enumerate(
        zip(leaves, jax.tree_util.tree_leaves(grads), strict=True)
    ):
        u = rng.standard_normal(leaf.shape)
        shifted = []
        for sign in (1.0, -1.0):
            moved = [x for _, x in leaves]
            moved[i] = leaf + sign * h * u
            shifted.append(numpy_loss(cfg, layout, treedef.unflatten(moved), batch, w))
        name = jax.tree_util.keystr(path)
        diffs[name] = (shifted[0] - shifted[1]) / (2 * h)
        ours[name] = float(np.vdot(np.asarray(g, np.float64), u))
    scale = max(abs(v) for v in diffs.values())
    errors = {k: abs(ours[k] - diffs[k]) / scale for k in diffs}
    worst = max(errors, key=errors.get)
    print(layout, "largest directional-derivative error", f"{errors[worst]:.1e}", worst)
    for k, err in errors.items():
        assert err <= 5e-5, (k, ours[k], diffs[k])


# Every layout scanned; unrolled (twice the compile time) a shared, a grouped and an unshared one:
# the attention and matmul choices sit inside a layer, apart from how layers are looped.
CASES = [(layout, True) for layout in LAYOUT_GROUPS] + [
    (layout, False) for layout in ("all", "groups:2", "none")
]


@pytest.mark.parametrize(
    "layout,scan", CASES, ids=[f"{a}-{'scan' if s else 'unrolled'}" for a, s in CASES]
)
def test_fused_attention_and_autodiff_match_numpy(layout, scan):
    """Fused attention + autodiff matmuls, every sharing layout: outputs and hidden states within
    test_model's tolerances of the NumPy reference, and every leaf's gradient against central
    differences of the NumPy loss."""
    cfg = tiny_config(layout)
    params = reference_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    reference = numpy_forward(cfg, layout, params, batch)
    w = weights(reference[:4])
    (_, out), grads = value_and_grad(cfg, batch, w, Execution(scan_layers=scan, **ACCELERATOR))(
        params
    )
    check_against_numpy(cfg, layout, out, reference)
    check_gradient_by_differences(cfg, layout, params, batch, w, grads)


def largest_error(ours, ref) -> tuple[float, str]:
    """max |ours - ref| / max |ref| over the leaves of two trees, and the worst leaf's path; not
    the key bias, whose exact gradient is 0 (softmax ignores a per-row shift): noise on both."""
    pairs = zip(
        jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves(ref), strict=True
    )
    errors = {
        jax.tree_util.keystr(path): float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) or 1.0))
        for (path, a), b in pairs
        if "['key']['bias']" not in jax.tree_util.keystr(path)
    }
    worst = max(errors, key=errors.get)
    return errors[worst], worst


def test_each_accelerator_choice_matches_the_cpu_path():
    """Fused attention alone, autodiff alone and both against the CPU path: max |difference| / max
    |CPU path| of each output and gradient leaf, grouped layout. Measured (groups:2, none):
    autodiff alone, outputs equal and gradients within 6e-10 on one host and 2.6e-8 on another
    (the same products summed in another order, which XLA picks per CPU); so its bound is float32's
    epsilon (1.2e-7) relative to the largest gradient. With fused attention, outputs within 1.1e-6
    and gradients 2.9e-6 (the embedding LayerNorm's). Tolerances ~4x."""
    layout, batch = "groups:2", tiny_batch()
    cfg = tiny_config(layout)
    params = reference_params(AlbertForPreTraining(cfg))
    w = weights(numpy_forward(cfg, layout, params, batch)[:4])
    (_, ref_out), ref = value_and_grad(cfg, batch, w, Execution(**CPU_PATH))(params)
    ref_out = {k: getattr(ref_out, k) for k in OUTPUTS}
    for choice, tolerances in (
        ({"attention_impl": "fused"}, (4e-6, 1e-5)),
        ({"matmul_grad": "autodiff"}, (0.0, float(np.finfo(np.float32).eps))),
        (ACCELERATOR, (4e-6, 1e-5)),
    ):
        (_, out), grads = value_and_grad(cfg, batch, w, Execution(**{**CPU_PATH, **choice}))(params)
        out_err = largest_error({k: getattr(out, k) for k in OUTPUTS}, ref_out)
        grad_err = largest_error(grads, ref)
        print(layout, choice, "outputs", out_err, "gradients", grad_err)
        assert out_err[0] <= tolerances[0] and grad_err[0] <= tolerances[1], choice


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernel_spec", ["kn", "nk"])
def test_autodiff_matmul_keeps_the_dtypes_and_float32_accumulation(dtype, kernel_spec):
    """`matmul(grad="autodiff")`: the hand-written form's float32 product, bit for bit; gradients
    in their operands' dtypes and close to the hand-written ones (equal in float32; in bfloat16
    autodiff rounds the activation gradient to bf16, ~2^-8 relative); a jvp that is the
    product rule."""
    K, N = 24, 40
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((2, 5, K)), jnp.float32)
    shape = (K, N) if kernel_spec == "kn" else (N, K)
    kernel = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    g = jnp.asarray(rng.standard_normal((2, 5, N)), jnp.float32)
    mm = functools.partial(matmul, dtype=jnp.dtype(dtype), kernel_spec=kernel_spec)
    y, vjp = jax.vjp(functools.partial(mm, grad="autodiff"), x, kernel)
    y_ref, vjp_ref = jax.vjp(functools.partial(mm, grad="custom"), x, kernel)
    assert y.dtype == jnp.float32
    np.testing.assert_array_equal(y, y_ref)
    rtol = 1e-6 if dtype == "float32" else 1e-2
    for a, b in zip(vjp(g), vjp_ref(g), strict=True):
        assert a.dtype == b.dtype == jnp.float32
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.max(np.abs(b)))
    dx, dk = 0.1 * x, 0.1 * kernel
    _, tangent = jax.jvp(functools.partial(mm, grad="autodiff"), (x, kernel), (dx, dk))
    want = mm(dx, kernel) + mm(x, dk)
    np.testing.assert_allclose(tangent, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))


def tree_vdot(a, b):
    leaves = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    return sum(jnp.vdot(x, y) for x, y in leaves)


def test_forward_mode_autodiff_needs_matmul_grad_autodiff():
    """jax.jvp through the model: with autodiff matmuls, J u equals the NumPy reference's central
    difference along u, and <w, J u> equals <J^T w, u> from the CPU path's reverse mode; a
    Hessian-vector product (forward over reverse) equals reverse over reverse on the CPU path.
    With the hand-written gradient (and `auto` on CPU) jvp raises: a custom_vjp has no
    forward-mode rule, which is why `autodiff` exists. Measured relative errors 1.1e-6, 1.9e-6
    and 1.3e-6 (of the largest entry); tolerance 1e-5."""
    layout, batch = "groups:2", tiny_batch()
    cfg = tiny_config(layout)
    autodiff, custom = Execution(matmul_grad="autodiff"), Execution(matmul_grad="custom")
    params = reference_params(AlbertForPreTraining(cfg))  # the heads too: numpy_forward's
    rng = np.random.default_rng(3)
    u = jax.tree_util.tree_map(  # each leaf moved on its own scale
        lambda p: jnp.asarray(np.std(p) * rng.standard_normal(p.shape), p.dtype), params
    )

    def seq(ex, p):
        return AlbertForPreTraining(cfg, ex).apply({"params": p}, **batch).sequence_output

    def loss(ex, p):
        return jnp.sum(seq(ex, p) ** 2)

    _, tangent = jax.jit(lambda p, t: jax.jvp(functools.partial(seq, autodiff), (p,), (t,)))(
        params, u
    )
    f64 = functools.partial(jax.tree_util.tree_map, lambda x: np.asarray(x, np.float64))
    p64, u64, h = f64(params), f64(u), 1e-5
    moved = [jax.tree_util.tree_map(lambda a, b, s=s: a + s * h * b, p64, u64) for s in (1, -1)]
    plus, minus = (numpy_forward(cfg, layout, p, batch)[0] for p in moved)
    fd = (plus - minus) / (2 * h)
    print("jvp", np.max(np.abs(tangent - fd)) / np.max(np.abs(fd)))
    np.testing.assert_allclose(tangent, fd, atol=1e-5 * np.max(np.abs(fd)))

    w = jnp.asarray(rng.standard_normal(tangent.shape), jnp.float32)
    (jt_w,) = jax.jit(lambda p, w: jax.vjp(functools.partial(seq, custom), p)[1](w))(params, w)
    lhs, rhs = float(jnp.vdot(w, tangent)), float(tree_vdot(jt_w, u))
    print("vjp identity", abs(lhs - rhs) / abs(rhs))
    assert abs(lhs - rhs) <= 1e-5 * abs(rhs), (lhs, rhs)

    hvp = jax.jit(lambda p, t: jax.jvp(jax.grad(functools.partial(loss, autodiff)), (p,), (t,))[1])
    grad_custom = jax.grad(functools.partial(loss, custom))
    rev_rev = jax.jit(jax.grad(lambda p, t: tree_vdot(grad_custom(p), t)))
    error, leaf = largest_error(hvp(params, u), rev_rev(params, u))
    print("hvp", error, leaf)
    assert error <= 1e-5, leaf

    for ex in (custom, Execution(matmul_grad="auto")):
        with pytest.raises(TypeError, match="forward-mode autodiff"):
            jax.jvp(functools.partial(seq, ex), (params,), (u,))


def test_auto_resolves_to_explicit_and_custom_on_cpu_only(monkeypatch):
    """`auto` is today's rule: explicit attention and the hand-written gradient on CPU; off CPU
    fused attention unless attention dropout applies, and autodiff. The model takes the path
    the rule names (explicit_attention / dot_product_attention called)."""
    auto = Execution()
    assert jax.default_backend() == "cpu"
    assert resolve_attention(auto, 0.0) == "explicit" and resolve_matmul_grad(auto) == "custom"
    for backend in ("gpu", "tpu"):
        assert resolve_attention(auto, 0.0, backend) == "fused"
        assert resolve_attention(auto, 0.1, backend) == "explicit"
        assert resolve_matmul_grad(auto, backend) == "autodiff"
    for impl in ("fused", "explicit"):
        assert resolve_attention(auto.replace(attention_impl=impl), 0.0, "cpu") == impl
    for grad in ("custom", "autodiff"):
        assert resolve_matmul_grad(auto.replace(matmul_grad=grad), "tpu") == grad

    calls = []
    spy = lambda name, fn: lambda *a, **k: calls.append(name) or fn(*a, **k)  # noqa: E731
    monkeypatch.setattr(albert, "explicit_attention", spy("explicit", albert.explicit_attention))
    monkeypatch.setattr(jax.nn, "dot_product_attention", spy("fused", jax.nn.dot_product_attention))
    ids = tiny_batch()["input_ids"]
    for ex, want in ((auto, "explicit"), (auto.replace(attention_impl="fused"), "fused")):
        calls.clear()
        AlbertModel(tiny_config(), ex).init(jax.random.PRNGKey(0), ids)
        assert set(calls) == {want}, (ex.attention_impl, calls)


def test_fused_attention_with_attention_dropout_in_training_is_a_clear_error():
    """The fused kernel has no dropout: asked for with attention dropout in training it raises
    (rather than silently running the explicit path); evaluation, and hidden dropout alone, run."""
    cfg = tiny_config(attention_dropout=0.1, hidden_dropout=0.1)
    fused = Execution(attention_impl="fused")
    batch = tiny_batch()
    model = AlbertForPreTraining(cfg, fused)
    params = reference_params(model)
    rngs = {"dropout": jax.random.PRNGKey(0)}
    with pytest.raises(ValueError, match="attention_impl='fused' cannot apply attention dropout"):
        model.apply({"params": params}, **batch, deterministic=False, rngs=rngs)
    model.apply({"params": params}, **batch, deterministic=True)
    hidden_only = AlbertForPreTraining(cfg.replace(attention_dropout=0.0), fused)
    hidden_only.apply({"params": params}, **batch, deterministic=False, rngs=rngs)

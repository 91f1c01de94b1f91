"""Dropout statistics: keep rate, 1/(1-p) rescale, independent masks per layer, step and example,
the same masks under scan and unrolled loops, and which sites are active when.

Model-level tests log every call of the model's `dropout` helper (input and output, in program
order) through an ordered debug callback, so masks are read off the real forward pass."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tiny_batch, tiny_config

from albert_jax import AlbertModel
from albert_jax.model import albert as model_lib
from albert_jax.model.albert import init_params
from albert_jax.model.config import Execution

P = 0.3
L = 4
CFG = tiny_config("all", num_layers=L, hidden_dropout=P, attention_dropout=P)  # shared block
SCANNED = Execution()
Q = 2 * P * (1 - P)  # chance that two independent masks differ at a position
CALLS = []  # (input, output) of every dropout call of the last run


def binomial_ok(frac, p, n, sigmas=5.0):
    """|frac - p| within `sigmas` binomial standard deviations of a mean of n Bernoulli(p)."""
    return abs(frac - p) < sigmas * math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module", autouse=True)
def logged_dropout():
    original = model_lib.dropout

    def logged(x, rate, key, deterministic):
        y = original(x, rate, key, deterministic)
        log = lambda a, b: CALLS.append((np.asarray(a), np.asarray(b)))
        jax.debug.callback(log, x, y, ordered=True)  # ordered: program order, also inside scan
        return y

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(model_lib, "dropout", logged)
        yield


@functools.cache
def params():
    # Jitted: eager Flax init of the scanned model is several times slower than compiling it.
    return jax.jit(lambda k: init_params(AlbertModel(CFG), k))(jax.random.key(0))


@functools.cache
def compiled(cfg, deterministic, execution):
    b = tiny_batch()
    mask = jnp.ones_like(b["attention_mask"])  # no padding: no attention prob is exactly 0
    return jax.jit(
        lambda p, r: (
            AlbertModel(cfg, execution)
            .apply(
                {"params": p},
                b["input_ids"],
                b["token_type_ids"],
                mask,
                deterministic=deterministic,
                rngs={"dropout": r},
            )
            .sequence_output
        )
    )


def run(cfg=CFG, step=0, deterministic=False, execution=SCANNED):
    """Sequence output and the logged calls [embeddings, (attention probs, attention output, FFN
    output) per layer]; the key of step s is fold_in(base, s), as the trainer does."""
    fn, p = compiled(cfg, deterministic, execution), params()  # before clearing: init calls it
    CALLS.clear()
    out = fn(p, jax.random.fold_in(jax.random.key(7), step))
    jax.effects_barrier()
    return np.asarray(out), list(CALLS)


def kinds(calls):
    """Calls grouped by site: embeddings, attention probs, attention output, FFN output."""
    assert len(calls) == 1 + 3 * L
    return {
        "embeddings": calls[:1],
        "probs": calls[1::3],
        "attention_out": calls[2::3],
        "ffn_out": calls[3::3],
    }


def masks(calls):
    for x, _ in calls:
        assert np.all(x != 0)  # so y == 0 means dropped
    return [y != 0 for _, y in calls]


def assert_independent(a, b, what):
    d = np.mean(a != b)
    assert binomial_ok(d, Q, a.size), f"{what}: masks differ at {d:.3f}, expected ~{Q:.2f}"


def test_helper_keeps_1_minus_p_and_preserves_the_mean():
    n = 200_000
    x = jax.random.uniform(jax.random.key(0), (n,), minval=0.5, maxval=1.5)
    for p in (0.1, 0.3, 0.5):
        y = np.asarray(model_lib.dropout(x, p, jax.random.key(1), False))
        kept = y != 0
        # Binomial: kept fraction ~ N(1-p, p(1-p)/n); 5 sigma is <= 0.0056 here.
        assert binomial_ok(kept.mean(), 1 - p, n), (p, kept.mean())
        np.testing.assert_allclose(y[kept], np.asarray(x)[kept] / (1 - p), rtol=1e-6)
        # E[y] = E[x]: the mean of n draws is within 5 standard errors.
        assert abs(y.mean() - x.mean()) < 5 * y.std() / math.sqrt(n), (p, y.mean(), x.mean())
    np.testing.assert_array_equal(model_lib.dropout(x, 0.3, None, True), x)
    np.testing.assert_array_equal(model_lib.dropout(x, 0.0, None, False), x)


def test_model_sites_keep_1_minus_p_and_rescale():
    _, calls = run()
    for kind, site in kinds(calls).items():
        x = np.concatenate([a.ravel() for a, _ in site])
        y = np.concatenate([b.ravel() for _, b in site])
        kept = np.concatenate([m.ravel() for m in masks(site)])
        # Binomial, 5 sigma over all L layers (n = 384 for the embeddings, else >= 3072).
        assert binomial_ok(kept.mean(), 1 - P, kept.size), (kind, kept.mean())
        np.testing.assert_allclose(y[kept], x[kept] / (1 - P), rtol=1e-6, err_msg=kind)


def test_masks_differ_across_layers_steps_and_examples():
    _, step0 = run(step=0)
    _, step1 = run(step=1)
    for kind, site in kinds(step0).items():
        m = masks(site)
        # Each application of the one shared (scanned) block draws its own mask.
        for i in range(len(m)):
            for j in range(i):
                assert_independent(m[i], m[j], f"{kind} layers {j} and {i}")
        for i, mi in enumerate(m):
            assert_independent(mi[0], mi[1], f"{kind} layer {i} examples 0 and 1")
    # Within a layer the two hidden-dropout sites differ too.
    sites = kinds(step0)
    for a, f in zip(masks(sites["attention_out"]), masks(sites["ffn_out"]), strict=True):
        assert_independent(a, f, "attention output vs FFN output")
    for i, (a, b) in enumerate(zip(masks(step0), masks(step1), strict=True)):
        assert_independent(a, b, f"call {i} steps 0 and 1")


def test_scan_and_unrolled_draw_identical_masks():
    out_scan, scan = run()
    out_loop, loop = run(execution=Execution(scan_layers=False))
    for i, (a, b) in enumerate(zip(masks(scan), masks(loop), strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {i}")
    # f32 rounding only: XLA fuses the loop and the unrolled graph differently.
    np.testing.assert_allclose(out_scan, out_loop, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "hidden, attention", [(P, P), (P, 0.0), (0.0, P)], ids=["both", "hidden", "attention"]
)
def test_configured_sites_are_active(hidden, attention):
    cfg = CFG.replace(hidden_dropout=hidden, attention_dropout=attention)
    out, calls = run(cfg)
    hidden_sites = [c for c in calls if c[0].ndim == 3]  # embeddings, attention and FFN outputs
    probs = [c for c in calls if c[0].ndim == 4]  # [B, N, T, T]
    assert len(hidden_sites) == 1 + 2 * L
    # Attention probabilities pass through dropout once per layer when it is on; without it they
    # either skip the call (the fused kernel, off CPU) or pass through unchanged.
    if attention:
        assert len(probs) == L
    assert all(np.array_equal(x, y) for x, y in probs) == (not attention)
    for name, sites, rate in (("hidden", hidden_sites, hidden), ("probs", probs, attention)):
        dropped = np.mean([np.mean(y == 0) for _, y in sites]) if sites else 0.0
        assert (dropped > 0) == (rate > 0), (name, dropped)
    det, _ = run(cfg, deterministic=True)
    assert not np.allclose(out, det)


def test_deterministic_turns_every_site_off():
    det, calls = run(deterministic=True)
    for x, y in calls:
        np.testing.assert_array_equal(x, y)
    off, _ = run(CFG.replace(hidden_dropout=0.0, attention_dropout=0.0))
    np.testing.assert_array_equal(det, off)

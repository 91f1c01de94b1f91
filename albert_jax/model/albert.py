"""ALBERT in Flax linen: factorized embeddings, a post-LN encoder with any cross-layer sharing
layout, the tanh pooler, and the MLM / sentence-order pretraining heads.

Parameter tree (one path convention for every module, optimizer mask, sharding rule and converter):

    embeddings/{word_embeddings [V,E], position_embeddings [P,E], token_type_embeddings [T,E],
                LayerNorm/{scale,bias} [E]}
    encoder/projection/{kernel [E,H], bias [H]}                  (when E != H, or forced)
    encoder/attention/{query,key,value,output}/{kernel,bias}, encoder/attention/LayerNorm/*
    encoder/ffn/{intermediate,output}/{kernel,bias}, encoder/ffn/LayerNorm/{scale,bias}
    pooler/{kernel,bias}
    mlm/{transform/{kernel,bias}, LayerNorm/{scale,bias}, output_bias [V]}     (pretraining head)
    sop/{kernel [H,2], bias [2]}                                                 (pretraining head)

Every leaf under encoder/attention (encoder/ffn) has a leading 'layers' axis of length
`attention_groups` (`ffn_groups`), 1 included: a leaf's rank never depends on the layout, and
scanned and unrolled execution read the same tree. The encoder is one `nn.scan` over the L layer
applications with all parameters broadcast into the loop (or a Python loop, `Execution.scan_layers`
False);
layer i picks its group's slice with `(i * G) // L`. One mechanism thus covers shared, grouped,
partially shared and unshared layouts, and a shared block's gradient is accumulated across its
applications.

(About 550 lines: the encoder and its two pretraining heads read best in one place; the heads that
fine-tuning adds live in heads.py.)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from albert_jax.model.config import AlbertConfig, Execution

ACTIVATIONS = {
    "gelu_new": functools.partial(jax.nn.gelu, approximate=True),
    "gelu": functools.partial(jax.nn.gelu, approximate=False),
    "relu": jax.nn.relu,
}
MASK_VALUE = -10000.0  # additive attention bias at padded keys, as the original ALBERT
REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    # Every matmul's output is named "dot" (`matmul`, the attention einsums): its hand-written
    # gradient hides the dot from `checkpoint_dots`.
    "save_dots": jax.checkpoint_policies.save_only_these_names("dot"),
}


def truncated_normal(stddev: float):
    """TF's truncated_normal_initializer: N(0, stddev) cut at two standard deviations."""

    def init(key, shape, dtype=jnp.float32):
        return (
            jax.random.truncated_normal(key, -2.0, 2.0, shape, jnp.float32).astype(dtype) * stddev
        )

    return init


# Set while a train step runs with the batch axes manual (`albert_jax.train.gradients`): stacked
# leaves may arrive as a device's shard, `gather.local_shape(path, shape)` says its shape, and
# `gather(path, slice)` gathers a layer's slice where the layer uses it (FSDP). None: the
# parameters are whole.
_GATHER: contextvars.ContextVar = contextvars.ContextVar("albert_gather", default=None)


# The platform the model is traced for ('cpu', 'gpu', 'tpu'): the `auto` execution switches
# resolve for it. Set from the mesh's devices (`albert_jax.train.trainer.CompiledTask.scope`), so
# a TPU program built on a CPU host gets the TPU variants; None: `jax.default_backend()`.
_PLATFORM: contextvars.ContextVar = contextvars.ContextVar("albert_platform", default=None)


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def gathering(fn):
    """Within: every slice of a stacked (G > 1) parameter goes through `fn(path, slice)` (see
    `_GATHER`)."""
    return _setting(_GATHER, fn)


def target_platform(platform: str | None):
    """Within: the `auto` switches resolve for `platform` rather than the host's backend."""
    return _setting(_PLATFORM, platform)


def _platform(backend: str | None) -> str:
    return backend or _PLATFORM.get() or jax.default_backend()


def grouped_param(
    module: nn.Module, name: str, init, shape, axes, groups: int | None = None, group=None
):
    """A parameter carrying logical axis names. With `groups` (an encoder sub-block's G >= 1) it
    is stacked on a leading 'layers' axis of that length and the slice `group` is returned: a
    traced index in a scan, a Python int when unrolled (a static slice; 0 when G = 1)."""
    dtype = jnp.dtype(module.execution.param_dtype)
    if groups is None:
        return module.param(name, nn.with_logical_partitioning(init, axes), tuple(shape), dtype)
    gather, path = _GATHER.get(), "/".join((*module.scope.path, name))
    full = (groups, *shape)
    stacked = module.param(
        name,
        nn.with_logical_partitioning(init, ("layers", *axes)),
        full if gather is None else gather.local_shape(path, full),  # a device's shard
        dtype,
    )
    if groups == 1:
        return stacked[0]
    # jnp.asarray: params given as NumPy arrays (e.g. `checkpoint.load`) cannot take a traced index.
    value = jnp.asarray(stacked)[group]
    return value if gather is None else gather(path, value)


def dropout(x, rate: float, key, deterministic: bool):
    if deterministic or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0).astype(x.dtype)


class Dense(nn.Module):
    """x @ kernel + bias in the compute dtype, accumulating in float32."""

    config: AlbertConfig
    features: int
    axes: tuple[str | None, str | None]
    groups: int | None = None  # an encoder sub-block's group count: stacked (grouped_param)
    execution: Execution = Execution()

    @nn.compact
    def __call__(self, x, group=None):
        c = self.config
        kernel = grouped_param(
            self,
            "kernel",
            truncated_normal(c.initializer_range),
            (x.shape[-1], self.features),
            self.axes,
            self.groups,
            group,
        )
        bias = grouped_param(
            self, "bias", nn.initializers.zeros, (self.features,), self.axes[1:], self.groups, group
        )
        ex = self.execution
        dtype = jnp.dtype(ex.dtype)
        return (matmul(x, kernel, dtype, grad=resolve_matmul_grad(ex)) + bias).astype(dtype)


def resolve_matmul_grad(execution: Execution, backend: str | None = None) -> str:
    """execution.matmul_grad, auto resolved: the gradient written for CPU there, autodiff
    elsewhere."""
    if execution.matmul_grad == "auto":
        return "custom" if _platform(backend) == "cpu" else "autodiff"
    return execution.matmul_grad


def matmul(x, kernel, dtype, kernel_spec: str = "kn", grad: str = "custom"):
    """x [..., K] @ kernel [K, N] (`kernel_spec` "nk": kernel [N, K], as the tied word table)
    with `dtype` operands, accumulating and returning float32, named "dot" for remat. `grad`:
    "custom" (`_matmul`'s) or "autodiff" (JAX's own, which also takes jvp: a custom_vjp cannot)."""
    product = _matmul if grad == "custom" else _product
    return checkpoint_name(product(x, kernel, dtype, kernel_spec), "dot")


def _product(x, kernel, dtype, kernel_spec):
    x, w = x.astype(dtype), kernel.astype(dtype)
    return jnp.einsum(f"...k,{kernel_spec}->...n", x, w, preferred_element_type=jnp.float32)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _matmul(x, kernel, dtype, kernel_spec):
    """The gradient is written out for XLA's CPU backend (benchmarks/train_step.py), with
    `dtype` operands and float32 accumulation. bf16 dots run there at about twice the f32 rate
    only when they contract the last axis of their left operand; autodiff's own transposes (a
    bf16 result; the token axes contracted on the left) fall back to the f32 rate: 2.0 s
    against 3.2 s a bf16 base step. In float32 every form runs at the same rate, and the kernel
    gradient contracts the token axes in place rather than through a transposed copy of the
    activations: 3.3 s against 3.5 s. Each gradient keeps its operand's dtype (the kernel's
    stays float32)."""
    return _product(x, kernel, dtype, kernel_spec)


def _matmul_fwd(x, kernel, dtype, kernel_spec):
    return _matmul(x, kernel, dtype, kernel_spec), (x, kernel)


def _matmul_bwd(dtype, kernel_spec, res, g):
    x, kernel = res
    xc, w, g = x.astype(dtype), kernel.astype(dtype), g.astype(dtype)
    f32 = jnp.float32
    dx = jnp.einsum(f"...n,{kernel_spec}->...k", g, w, preferred_element_type=f32)
    a, b = (xc, g) if kernel_spec == "kn" else (g, xc)
    if jnp.dtype(dtype) == f32:  # the token axes contracted in place: no transposed copy
        rows = lambda t: t.reshape(-1, t.shape[-1])
        dw = jax.lax.dot_general(rows(a), rows(b), (((0,), (0,)), ((), ())))
    else:
        dw = jnp.einsum("...i,...j->ij", a, b, preferred_element_type=f32)
    return dx.astype(x.dtype), dw.astype(kernel.dtype)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


class LayerNorm(nn.Module):
    """LayerNorm over the last axis, computed in float32. The variance is E[x^2] - E[x]^2 (one
    pass over x, as flax.linen.LayerNorm's default), not E[(x - mean)^2] (two passes): in float32
    the two agree to ~1e-6 relative at these activations' scales, and one pass moves fewer bytes
    through the memory-bound fine-tuning step (benchmarks/finetune_step.py)."""

    config: AlbertConfig
    axis_name: str = "hidden"
    groups: int | None = None
    execution: Execution = Execution()

    @nn.compact
    def __call__(self, x, group=None):
        c, d = self.config, x.shape[-1]
        axes = (self.axis_name,)
        scale = grouped_param(self, "scale", nn.initializers.ones, (d,), axes, self.groups, group)
        bias = grouped_param(self, "bias", nn.initializers.zeros, (d,), axes, self.groups, group)
        y = normalize(x, c.layer_norm_eps) * scale + bias
        return y.astype(jnp.dtype(self.execution.dtype))


def normalize(x, eps: float):
    """(x - mean) / sqrt(var + eps) over the last axis, in float32 (see LayerNorm)."""
    x = x.astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.maximum(jnp.mean(jnp.square(x), axis=-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * jax.lax.rsqrt(var + eps)


class Embeddings(nn.Module):
    """word + position + token-type tables of width E, then LayerNorm(E) and dropout."""

    config: AlbertConfig
    execution: Execution = Execution()

    def setup(self):
        c = self.config
        init = truncated_normal(c.initializer_range)
        E = c.embedding_size
        self.word_embeddings = grouped_param(
            self, "word_embeddings", init, (c.vocab_size, E), ("vocab", "embed")
        )
        self.position_embeddings = grouped_param(
            self, "position_embeddings", init, (c.max_position_embeddings, E), (None, "embed")
        )
        self.token_type_embeddings = grouped_param(
            self, "token_type_embeddings", init, (c.type_vocab_size, E), (None, "embed")
        )
        self.LayerNorm = LayerNorm(c, axis_name="embed", execution=self.execution)

    def __call__(self, input_ids, token_type_ids, rng, deterministic: bool, position_ids=None):
        c = self.config
        seq_len = input_ids.shape[1]
        if position_ids is None:
            if seq_len > c.max_position_embeddings:
                raise ValueError(
                    f"input length {seq_len} exceeds "
                    f"max_position_embeddings {c.max_position_embeddings}"
                )
            positions = self.position_embeddings[None, :seq_len]
        else:  # explicit positions (cached decoding)
            positions = jnp.take(self.position_embeddings, position_ids, axis=0)
        x = (
            jnp.take(self.word_embeddings, input_ids, axis=0)
            + jnp.take(self.token_type_embeddings, token_type_ids, axis=0)
            + positions
        )
        return dropout(self.LayerNorm(x), c.hidden_dropout, rng, deterministic)

    def attend(self, x):
        """Logits against the word table (the MLM decoder is tied to it), in float32."""
        ex = self.execution
        return matmul(x, self.word_embeddings, jnp.dtype(ex.dtype), "nk", resolve_matmul_grad(ex))


class AttentionBlock(nn.Module):
    """Self-attention, output dense, dropout, residual and post-attention LayerNorm."""

    config: AlbertConfig
    groups: int = 1
    execution: Execution = Execution()

    def setup(self):
        c, g, ex = self.config, self.groups, self.execution
        H = c.hidden_size
        self.query = Dense(c, H, ("hidden", "heads"), g, ex)
        self.key = Dense(c, H, ("hidden", "heads"), g, ex)
        self.value = Dense(c, H, ("hidden", "heads"), g, ex)
        self.output = Dense(c, H, ("heads", "hidden"), g, ex)
        self.LayerNorm = LayerNorm(c, groups=g, execution=ex)

    def __call__(self, x, bias, group, rng, deterministic: bool, cache=None):
        """With `cache` = (keys, values [B, S, N, D], index): this call's keys and values are
        written at slots index.. of the cache and the queries attend over all S slots (`bias`
        [B, 1, T, S] says which hold something visible); returns (output, (keys, values))."""
        c = self.config
        B, T, _ = x.shape
        split = lambda y: y.reshape(B, T, c.num_heads, c.head_dim)  # heads are contiguous D-slices
        q, k, v = (
            split(self.query(x, group)),
            split(self.key(x, group)),
            split(self.value(x, group)),
        )
        if cache is not None:
            ck, cv, index = cache
            start = (0, index, 0, 0)
            k = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), start)
            v = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), start)
        rate = 0.0 if deterministic else c.attention_dropout
        if resolve_attention(self.execution, rate) == "fused":
            ctx = jax.nn.dot_product_attention(q, k, v, bias=bias.astype(q.dtype))
            ctx = checkpoint_name(ctx, "dot")  # as explicit_attention's context, for save_dots
        else:
            ctx = explicit_attention(q, k, v, bias, rate, _fold(rng, 0))
        a = self.output(ctx.reshape(B, T, c.hidden_size), group)
        a = dropout(a, c.hidden_dropout, _fold(rng, 1), deterministic)
        out = self.LayerNorm(a + x, group)
        return out if cache is None else (out, (k, v))


def resolve_attention(execution: Execution, rate: float, backend: str | None = None) -> str:
    """The attention at dropout `rate`: explicit, or fused (jax.nn.dot_product_attention). auto:
    fused off CPU without dropout; on CPU the einsum form moves ~15 % fewer bytes. fused with
    dropout raises, not falls back: a run that names the kernel (a benchmark) should get it."""
    impl, backend = execution.attention_impl, _platform(backend)
    if impl == "auto":
        return "fused" if rate == 0.0 and backend != "cpu" else "explicit"
    if impl == "fused" and rate > 0.0:
        raise ValueError(
            f"attention_impl='fused' cannot apply attention dropout (attention_dropout={rate} in "
            "training): set attention_dropout=0.0, or attention_impl='auto' or 'explicit'"
        )
    return impl


def explicit_attention(q, k, v, bias, rate: float, key):
    """Softmax attention with dropout on the probabilities (what the fused kernel cannot do).
    The 1/sqrt(D) scale goes on q, the smaller tensor when T > D."""
    q = q * jnp.asarray(q.shape[-1] ** -0.5, q.dtype)
    logits = jnp.einsum("btnd,bsnd->bnts", q, k, preferred_element_type=jnp.float32)
    logits = checkpoint_name(logits, "dot") + bias
    probs = dropout(jax.nn.softmax(logits, axis=-1), rate, key, rate == 0.0).astype(v.dtype)
    return checkpoint_name(jnp.einsum("bnts,bsnd->btnd", probs, v), "dot")


class FFNBlock(nn.Module):
    """Dense H->I, activation, dense I->H, dropout, residual and the layer's final LayerNorm."""

    config: AlbertConfig
    groups: int = 1
    execution: Execution = Execution()

    def setup(self):
        c, g, ex = self.config, self.groups, self.execution
        self.intermediate = Dense(c, c.intermediate_size, ("hidden", "mlp"), g, ex)
        self.output = Dense(c, c.hidden_size, ("mlp", "hidden"), g, ex)
        self.LayerNorm = LayerNorm(c, groups=g, execution=ex)

    def __call__(self, x, group, rng, deterministic: bool):
        c = self.config
        act = ACTIVATIONS[c.hidden_act]
        # A scan stores each value the backward needs per layer: ~6 [B, S, I] arrays for GELU;
        # keep its input, recompute the rest.
        if self.execution.scan_layers:
            act = jax.checkpoint(act)
        h = act(self.intermediate(x, group))
        f = dropout(self.output(h, group), c.hidden_dropout, _fold(rng, 2), deterministic)
        return self.LayerNorm(f + x, group)


def _fold(rng, n):
    return None if rng is None else jax.random.fold_in(rng, n)


class Encoder(nn.Module):
    """E->H projection, then L applications of (attention block, FFN block)."""

    config: AlbertConfig
    execution: Execution = Execution()

    def setup(self):
        c, ex = self.config, self.execution
        if c.has_projection:
            self.projection = Dense(c, c.hidden_size, ("embed", "hidden"), execution=ex)
        self.attention = AttentionBlock(c, c.attention_groups, ex)
        self.ffn = FFNBlock(c, c.ffn_groups, ex)

    def layer(self, x, i, bias, rng, deterministic: bool, cache=None):
        """Layer application i (a Python int or a traced scalar); with a cache (see
        AttentionBlock) returns (output, this layer's keys and values)."""
        c = self.config
        rng = _fold(rng, i)  # dropout keys depend on the layer index only: scan == unrolled
        x = nn.with_logical_constraint(x, ("batch", "length", "act_hidden"))
        group = (i * c.attention_groups) // c.num_layers
        x = self.attention(x, bias, group, rng, deterministic, cache)
        x, kv = x if cache is not None else (x, None)
        x = self.ffn(x, (i * c.ffn_groups) // c.num_layers, _fold(rng, 3), deterministic)
        return x if cache is None else (x, kv)

    def __call__(
        self, x, attention_mask, rng, deterministic: bool, output_hidden_states: bool, cache=None
    ):
        """attention_mask [B, S] (keys to attend to) or [B, T, S] (per query). With `cache` =
        (keys, values [L, B, S, N, D], index) returns (output, updated (keys, values))."""
        c = self.config
        if c.has_projection:
            x = self.projection(x)
        if attention_mask.ndim == 2:
            attention_mask = attention_mask[:, None, :]
        bias = (1.0 - attention_mask[:, None].astype(jnp.float32)) * MASK_VALUE
        if cache is not None:
            return self._cached(x, bias, *cache)

        def body(module, carry, i, bias, rng):
            y = module.layer(carry, i, bias, rng, deterministic)
            return y, (y if output_hidden_states else None)

        ex = self.execution
        if ex.remat != "none":
            body = nn.remat(body, policy=REMAT_POLICIES[ex.remat], prevent_cse=not ex.scan_layers)
        if ex.scan_layers:
            scan = nn.scan(
                body,
                variable_broadcast="params",
                split_rngs={"params": False},
                in_axes=(0, nn.broadcast, nn.broadcast),
                length=c.num_layers,
            )
            y, states = scan(self, x, jnp.arange(c.num_layers), bias, rng)
            states = tuple(states[i] for i in range(c.num_layers)) if output_hidden_states else ()
        else:
            y, states = x, []
            for i in range(c.num_layers):
                y, s = body(self, y, i, bias, rng)
                states.append(s)
            states = tuple(states) if output_hidden_states else ()
        return y, ((x, *states) if output_hidden_states else None)

    def _cached(self, x, bias, keys, values, index):
        """Inference with a key/value cache: every layer reads and extends its slice."""
        c = self.config

        def body(module, carry, i, k, v, bias, index):
            return module.layer(carry, i, bias, None, True, (k, v, index))

        if self.execution.scan_layers:
            scan = nn.scan(
                body, variable_broadcast="params", split_rngs={"params": False},
                in_axes=(0, 0, 0, nn.broadcast, nn.broadcast), length=c.num_layers,
            )  # fmt: skip
            return scan(self, x, jnp.arange(c.num_layers), keys, values, bias, index)
        kvs = []
        for i in range(c.num_layers):
            x, kv = body(self, x, i, keys[i], values[i], bias, index)
            kvs.append(kv)
        return x, tuple(jnp.stack(t) for t in zip(*kvs, strict=True))


@flax.struct.dataclass
class AlbertOutput:
    sequence_output: jax.Array
    pooled_output: jax.Array
    mlm_logits: jax.Array | None = None
    sop_logits: jax.Array | None = None
    logits: jax.Array | None = None  # fine-tuning heads (albert_jax.model.heads)
    # L + 1 entries: the (projected) embedding output, then the output of every layer application.
    hidden_states: tuple[jax.Array, ...] | None = None


class AlbertModel(nn.Module):
    """The ALBERT backbone: embeddings, encoder, pooler. Heads subclass it, so every model keeps the
    same top-level parameter paths and a pretrained backbone drops into any head unchanged."""

    config: AlbertConfig
    execution: Execution = Execution()

    def setup(self):
        c, ex = self.config, self.execution
        self.embeddings = Embeddings(c, ex)
        self.encoder = Encoder(c, ex)
        self.pooler = Dense(c, c.hidden_size, ("hidden", None), execution=ex)

    def backbone(
        self, input_ids, token_type_ids, attention_mask, deterministic, output_hidden_states,
        position_ids=None, cache=None,
    ) -> AlbertOutput:  # fmt: skip
        """`attention_mask` [B, T] or per query [B, T, S]; `cache`: see Encoder (then `states`
        is the updated cache)."""
        c = self.config
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = jnp.ones_like(input_ids)
        use_dropout = not deterministic and (c.hidden_dropout > 0 or c.attention_dropout > 0)
        rng = self.make_rng("dropout") if use_dropout else None
        x = self.embeddings(input_ids, token_type_ids, _fold(rng, 0), deterministic, position_ids)
        seq, states = self.encoder(
            x, attention_mask, _fold(rng, 1), deterministic, output_hidden_states, cache
        )
        if cache is not None:
            return AlbertOutput(sequence_output=seq, pooled_output=None, hidden_states=states)
        pooled = jnp.tanh(self.pooler(seq[:, 0]).astype(jnp.float32)).astype(seq.dtype)
        return AlbertOutput(sequence_output=seq, pooled_output=pooled, hidden_states=states)

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> AlbertOutput:
        return self.backbone(
            input_ids, token_type_ids, attention_mask, deterministic, output_hidden_states
        )


class MLMHead(nn.Module):
    """dense H->E with the model's activation, LayerNorm(E); the decoder is the tied word table."""

    config: AlbertConfig
    execution: Execution = Execution()

    @nn.compact
    def __call__(self, x, decode):
        c, ex = self.config, self.execution
        x = ACTIVATIONS[c.hidden_act](
            Dense(c, c.embedding_size, ("hidden", "embed"), execution=ex, name="transform")(x)
        )
        x = LayerNorm(c, axis_name="embed", execution=ex, name="LayerNorm")(x)
        bias = grouped_param(
            self, "output_bias", nn.initializers.zeros, (c.vocab_size,), ("vocab",)
        )
        return decode(x) + bias


class AlbertForPreTraining(AlbertModel):
    """Backbone + MLM head (at the given masked positions, or everywhere) + SOP/NSP head (none
    with `sentence_head=False`: the MLM-only objective)."""

    sentence_head: bool = True

    def setup(self):
        super().setup()
        self.mlm = MLMHead(self.config, self.execution)
        if self.sentence_head:
            self.sop = Dense(self.config, 2, ("hidden", None), execution=self.execution)

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        masked_positions=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> AlbertOutput:
        out = self.backbone(
            input_ids, token_type_ids, attention_mask, deterministic, output_hidden_states
        )
        x = out.sequence_output
        if masked_positions is not None:  # [B, P] -> gather [B, P, H]
            x = jnp.take_along_axis(x, masked_positions[..., None].astype(jnp.int32), axis=1)
        mlm_logits = self.mlm(x, self.embeddings.attend)
        sop_logits = None
        if self.sentence_head:
            if not self.is_initializing() and "sop" not in self.variables.get("params", {}):
                raise ValueError(  # rather than flax's ScopeParamNotFoundError for /sop/kernel
                    "the parameters have no sop/ (sentence-order) head: an MLM-only model "
                    "(transformers' AlbertForMaskedLM, an MLM-only run); apply it with "
                    "AlbertForMaskedLM(config)"
                )
            sop_logits = self.sop(out.pooled_output).astype(jnp.float32)
        return out.replace(mlm_logits=mlm_logits, sop_logits=sop_logits)


class AlbertForMaskedLM(AlbertForPreTraining):
    """Backbone + MLM head, no sentence head (`sop_logits` is None): the model of a checkpoint
    without `sop/`, e.g. transformers' AlbertForMaskedLM or an MLM-only pretraining run."""

    sentence_head: bool = False


def init_params(model: nn.Module, rng, batch: int = 1, seq_len: int = 8) -> dict[str, Any]:
    """Initialize a model's parameters (logical-axis boxes removed) from dummy inputs."""
    ids = jnp.zeros((batch, seq_len), jnp.int32)
    variables = model.init(rng, ids)
    return nn.meta.unbox(variables["params"])


def count_params(config: AlbertConfig) -> int:
    """Backbone parameters (embeddings, projection, encoder, pooler) from the initialized shapes."""
    shapes = jax.eval_shape(lambda: init_params(AlbertModel(config), jax.random.key(0), seq_len=1))
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(shapes))

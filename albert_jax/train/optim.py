"""ALBERT's optimizers (LAMB, AdamW) and learning-rate schedule as optax transforms.

Why not `optax.lamb`: its `mask` only masks the weight decay, its trust ratio hits every leaf, and
`optax.scale_by_adam` always bias-corrects. The reference (google-research/albert
`lamb_optimizer.py`, `optimization.py`) excludes LayerNorm and bias parameters (regex
`LayerNorm|layer_norm|bias` searched in the variable name) from BOTH weight decay and the trust
ratio and has no bias correction. Per variable, with u the update and w the parameter:

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  u = m / (sqrt(v) + eps)
    u += wd * w                     (decayed: not excluded)
    r = |w| / |u| if both > 0 else 1 (adapted, LAMB only: not excluded)
    w -= lr * r * u

The reference has one variable per layer/group; our encoder sub-blocks stack their G groups on a
leading axis, so for those ("stacked") leaves the trust-ratio norms are taken over all axes but axis
0: one ratio per group, exactly as if each group were its own variable. Decisions are static
functions of the leaf path, `'/'.join(keys)`, e.g. `encoder/attention/query/kernel`.

Length (~550 lines): a quarter of it is the validation of optimizer settings and its messages
(`OptimConfig.check`), kept beside the transforms whose arguments it checks.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from albert_jax.errors import InputError
from albert_jax.model.sharing import stacked_paths
from albert_jax.sections import Section

DEFAULT_EXCLUDE = r"LayerNorm|layer_norm|bias"
OPTIMIZERS = ("lamb", "adamw")

PathPredicate = Callable[[str], bool]
Stacked = PathPredicate | Sequence[str] | str | None

# ---------------------------------------------------------------- paths


def path_str(path: Sequence[Any]) -> str:
    """'/'.join of a jax key path's keys: `encoder/attention/query/kernel` (what the `optim.*`
    regexes, e.g. lr_multipliers and frozen, match)."""
    return jax.tree_util.keystr(tuple(path), simple=True, separator="/")


def _map_with_path(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    return jax.tree_util.tree_map_with_path(lambda p, *xs: fn(path_str(p), *xs), tree, *rest)


def path_matcher(patterns: Stacked) -> PathPredicate:
    """A path predicate from a callable, one regex, or a sequence of regexes (re.search, any)."""
    if patterns is None:
        return lambda path: False
    if callable(patterns):
        return patterns
    if isinstance(patterns, str):
        patterns = (patterns,)
    compiled = [re.compile(p) for p in patterns]
    return lambda path: any(c.search(path) for c in compiled)


class Label(NamedTuple):
    decay: bool  # gets weight decay
    adapt: bool  # gets the LAMB trust ratio (AdamW: never)
    stacked: bool  # trust-ratio norms per slice of axis 0


def param_labels(
    params: Any,
    *,
    exclude: str | None = DEFAULT_EXCLUDE,
    stacked: Stacked = None,
    trust_ratio: bool = True,
    weight_decay: float = 0.01,
) -> dict[str, Label]:
    """{path: Label} for every leaf: what the optimizer does to it (for logs and tests)."""
    excluded = path_matcher(exclude)
    is_stacked = path_matcher(stacked)
    labels = {}

    def one(path, _):
        keep = not excluded(path)
        labels[path] = Label(keep and bool(weight_decay), keep and trust_ratio, is_stacked(path))

    _map_with_path(one, params)
    return labels


def config_labels(
    params: Any, optim_config, model_config, stacked: frozenset[str] | None = None
) -> dict[str, Label]:
    """`param_labels` for the optimizer that `make_optimizer(optim_config, model_config, ...,
    stacked)` builds."""
    o = OptimConfig.from_config(optim_config)
    return param_labels(
        params,
        exclude=o.exclude,
        stacked=stacked_patterns(model_config) if stacked is None else stacked.__contains__,
        trust_ratio=o.optimizer() == "lamb",
        weight_decay=o.weight_decay,
    )


# ---------------------------------------------------------------- transforms


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, *, bias_correction: bool = False
) -> optax.GradientTransformation:
    """u = m / (sqrt(v) + eps); bias-corrected m and v only if asked (the reference never is)."""

    def init_fn(params):
        zeros = lambda: jax.tree.map(jnp.zeros_like, params)
        return optax.ScaleByAdamState(count=jnp.zeros([], jnp.int32), mu=zeros(), nu=zeros())

    def update_fn(updates, state, params=None):
        del params
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, updates)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), state.nu, updates)
        count = optax.safe_int32_increment(state.count)
        if bias_correction:
            t = count.astype(jnp.float32)
            mu_hat = jax.tree.map(lambda m: m / (1 - b1**t), mu)
            nu_hat = jax.tree.map(lambda v: v / (1 - b2**t), nu)
        else:
            mu_hat, nu_hat = mu, nu
        out = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
        return out, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
    """g *= max_norm / max(|g|, max_norm), |g| the norm over every leaf: the reference's
    `tf.clip_by_global_norm`, one scalar for all leaves. (optax's selects between g and a clipped
    copy, which XLA writes out and reads beside g: on CPU the LAMB update then moves 80 bytes a
    parameter instead of 64, docs/performance.md.)"""

    def update_fn(updates, state, params=None):
        del params
        norm = optax.global_norm(updates)
        scale = max_norm / jnp.maximum(norm, max_norm)
        return jax.tree.map(lambda g: (g * scale).astype(g.dtype), updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def add_decayed_weights(weight_decay: float, decay: PathPredicate) -> optax.GradientTransformation:
    """u += weight_decay * w on the leaves whose path satisfies `decay`."""

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(optax.NO_PARAMS_MSG)
        add = lambda path, u, w: u + weight_decay * w if decay(path) else u
        return _map_with_path(add, updates, params), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def trust_ratio(w: jax.Array, u: jax.Array, axes: tuple[int, ...] | None = None) -> jax.Array:
    """|w| / |u| over `axes` (keepdims), 1 where either norm is 0."""
    norm = lambda x: jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32)), axis=axes, keepdims=True))
    w_norm, u_norm = norm(w), norm(u)
    ok = (w_norm > 0) & (u_norm > 0)
    return jnp.where(ok, w_norm / jnp.where(ok, u_norm, 1.0), 1.0)


def scale_by_trust_ratio(
    adapt: PathPredicate, stacked: PathPredicate = lambda path: False
) -> optax.GradientTransformation:
    """u *= trust_ratio(w, u) on adapted leaves; one ratio per axis-0 slice on stacked leaves."""

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(optax.NO_PARAMS_MSG)

        def one(path, u, w):
            if not adapt(path):
                return u
            axes = tuple(range(1, u.ndim)) if stacked(path) else None
            return (u * trust_ratio(w, u, axes)).astype(u.dtype)

        return _map_with_path(one, updates, params), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def _chain(
    learning_rate, b1, b2, eps, weight_decay, exclude, bias_correction, adapt, stacked
) -> optax.GradientTransformation:
    excluded = path_matcher(exclude)
    keep = lambda path: not excluded(path)
    parts = [scale_by_adam(b1, b2, eps, bias_correction=bias_correction)]
    if weight_decay:
        parts.append(add_decayed_weights(weight_decay, keep))
    if adapt:
        parts.append(scale_by_trust_ratio(keep, path_matcher(stacked)))
    parts.append(optax.scale_by_learning_rate(learning_rate))
    return optax.chain(*parts)


def lamb(
    learning_rate: float | optax.Schedule,
    *,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-6,
    weight_decay: float = 0.01,
    exclude: str | None = DEFAULT_EXCLUDE,
    bias_correction: bool = False,
    stacked: Stacked = None,
) -> optax.GradientTransformation:
    """The reference LAMB: leaves matching `exclude` get neither weight decay nor trust ratio.

    `stacked`: paths (predicate or regexes) whose axis 0 is a layer/group axis; their trust ratio is
    computed per slice. No gradient clipping here (see `make_optimizer`).
    """
    return _chain(learning_rate, b1, b2, eps, weight_decay, exclude, bias_correction, True, stacked)


def adamw(
    learning_rate: float | optax.Schedule,
    *,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-6,
    weight_decay: float = 0.01,
    exclude: str | None = DEFAULT_EXCLUDE,
    bias_correction: bool = False,
) -> optax.GradientTransformation:
    """The reference AdamWeightDecay: LAMB without the trust ratio (no bias correction either)."""
    return _chain(learning_rate, b1, b2, eps, weight_decay, exclude, bias_correction, False, None)


# ---------------------------------------------------------------- schedule


def warmup_polynomial_decay(
    peak_lr: float,
    warmup_steps: int,
    total_steps: int,
    end_lr: float = 0.0,
    power: float = 1.0,
    offset_decay: bool = False,
) -> optax.Schedule:
    """Linear warmup `peak_lr * step / warmup_steps` while step < warmup_steps, then poly decay.

    offset_decay=False (the reference, optimization.py): the decay
    `(peak - end) * (1 - min(step, total) / total) ** power + end` runs from step 0 and the warmup
    merely overrides it, so at step == warmup_steps the lr drops from ~peak to
    `peak * (1 - warmup / total)` (0.00176 -> 0.001716 for the paper's 3125 / 125000).
    offset_decay=True: the decay runs over [warmup, total] instead and starts at exactly peak_lr.
    The lr used for the update at optax count t is schedule(t), as the reference reads the global
    step before incrementing it (so the first update has lr 0 when there is a warmup).
    """
    if total_steps <= 0 or not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps})")
    if offset_decay and warmup_steps == total_steps:
        raise ValueError("offset_decay needs warmup_steps < total_steps")
    start = warmup_steps if offset_decay else 0

    def schedule(step):
        step = jnp.asarray(step, jnp.float32)
        frac = (jnp.clip(step, start, total_steps) - start) / (total_steps - start)
        lr = (peak_lr - end_lr) * (1.0 - frac) ** power + end_lr
        if warmup_steps:
            lr = jnp.where(step < warmup_steps, peak_lr * step / warmup_steps, lr)
        return lr

    return schedule


# ---------------------------------------------------------------- config


class OptimConfigError(InputError):
    """An `optim.*` setting that cannot train (the message names the field)."""


@dataclasses.dataclass(frozen=True)
class OptimConfig(Section):
    """The optimizer's section (`config.optim`); its defaults are the paper's pretraining
    optimizer: LAMB, lr 0.00176, 3125 warmup of 125k steps, clip 1. The library reads it back
    with `from_config` (a leaf a config lacks takes the default here) and `check`s it."""

    name: str = "lamb"  # one of OPTIMIZERS
    learning_rate: float | None = 0.00176  # None: fine-tuning's auto (resolved before the run)
    warmup_steps: int = 3125
    total_steps: int = 125000
    end_lr: float = 0.0
    power: float = 1.0
    offset_decay: bool = False
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-6
    bias_correction: bool = False
    clip_norm: float | None = 1.0  # 0 or None: no clipping
    exclude: str = DEFAULT_EXCLUDE
    # Fine-tuning: learning-rate multipliers by path regex (first match wins), layer-wise decay
    # (per-layer weights only), frozen parameters (path regexes: no update at all).
    lr_multipliers: str | None = ""  # 'regex=m,regex=m' (or (regex, m) pairs); None: auto
    layerwise_decay: float = 1.0
    frozen: str = ""  # 'regex,regex'

    def optimizer(self) -> str:
        """`name`, lower-cased, checked against OPTIMIZERS (a ValueError otherwise)."""
        name = str(self.name).lower()
        if name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {name!r}: expected one of {list(OPTIMIZERS)}")
        return name

    def check(self, total_steps: int | None = None, auto: bool = False) -> None:
        """Refuses `optim.*` values that would train on nonsense (a negative learning rate trains
        happily towards a worse loss) or fail only after the data is built. Needs no model: the
        entry points call it first. `total_steps`: the schedule's length when known (None: derived
        later, e.g. from epochs, and checked by `warmup_polynomial_decay` then). `auto`: None may
        stand for fine-tuning's learning rate and multipliers chosen by model size."""

        def number(name: str, low: float, *, strict: bool = False, high: float | None = None):
            value = getattr(self, name)
            if value is None and auto and name == "learning_rate":
                return  # fine-tuning's auto: chosen by model size, after the checkpoint is read
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
            ok = ok and math.isfinite(value) and (value > low if strict else value >= low)
            if not ok or (high is not None and value >= high):
                bound = f"> {low:g}" if strict else f">= {low:g}"
                bound += f" and < {high:g}" if high is not None else ""
                raise OptimConfigError(
                    f"optim.{name} must be a finite number {bound}, got {value!r}"
                )

        try:
            self.optimizer()
        except ValueError as e:
            raise OptimConfigError(f"optim.name: {e}") from None
        number("learning_rate", 0)  # 0 is a frozen control run, not nonsense
        number("end_lr", 0)
        number("power", 0)
        number("weight_decay", 0)
        number("b1", 0, high=1)
        number("b2", 0, high=1)
        number("eps", 0, strict=True)  # 0: a parameter without gradient divides 0 by 0
        number("layerwise_decay", 0, strict=True)
        if self.clip_norm is not None:
            number("clip_norm", 0)  # 0 or None: no clipping
        multipliers = self.lr_multipliers
        if multipliers is None and not auto:
            raise OptimConfigError(
                "optim.lr_multipliers is None (auto) but nothing chooses it here"
            )
        try:
            pairs = [] if multipliers is None else _pairs(multipliers)
        except ValueError as e:
            raise OptimConfigError(f"optim.lr_multipliers={multipliers!r}: {e}") from None
        if not all(math.isfinite(m) and m >= 0 for _, m in pairs):
            raise OptimConfigError(
                f"optim.lr_multipliers={multipliers!r}: multipliers must be >= 0"
            )
        regexes = {
            "exclude": [self.exclude or ""],
            "frozen": regex_list(self.frozen),
            "lr_multipliers": [p for p, _ in pairs],
        }
        for field, patterns in regexes.items():
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as e:  # no ValueError: it would end the trainer in a traceback
                    raise OptimConfigError(
                        f"optim.{field}: {pattern!r} is not a regex ({e})"
                    ) from None
        warmup = self.warmup_steps
        if not isinstance(warmup, numbers.Integral) or isinstance(warmup, bool) or warmup < 0:
            raise OptimConfigError(f"optim.warmup_steps must be an integer >= 0, got {warmup!r}")
        if total_steps is not None:
            if total_steps <= 0 or warmup > total_steps:
                raise OptimConfigError(
                    f"optim.warmup_steps ({warmup}) must be at most the schedule's total_steps "
                    f"({total_steps}), and that must be > 0"
                )
            if self.offset_decay and warmup == total_steps:
                raise OptimConfigError("optim.offset_decay needs warmup_steps < total_steps")


def stacked_patterns(model_config) -> PathPredicate:
    """The leaves with a leading layer/group axis under `model_config`'s layout (read from the
    model's 'layers' logical axis, `sharing.stacked_paths`)."""
    paths = stacked_paths(model_config)
    return lambda path: path in paths


def layer_depths(model_config, stacked: frozenset[str]) -> Callable[[str], Any]:
    """Depth of a parameter for layer-wise learning-rate decay: embeddings (and the E->H
    projection) 0, layer i's own weights i + 1 (a vector over the stacked axis), everything
    else (pooler, heads) L + 1. Only per-layer weights have a depth: a shared block serves
    every depth at once, so the decay is refused for it. `stacked`: `sharing.stacked_paths` of
    `model_config`."""
    c, L = model_config, model_config.num_layers
    shared = [
        name for name, g in (("attention", c.attention_groups), ("ffn", c.ffn_groups)) if g != L
    ]
    if shared:
        raise ValueError(
            f"layer-wise learning-rate decay needs per-layer weights, but the {c.layout!r} layout "
            f"shares encoder/{' and encoder/'.join(shared)} across layers (one set of weights "
            "serves every depth). Unshare first (`--config.unshare=all`), or use per-group "
            "multipliers (`optim.lr_multipliers`), which work with any layout."
        )

    def depth(path: str):
        if path.startswith(("embeddings/", "encoder/projection/")):
            return 0
        return np.arange(1, L + 1) if path in stacked else L + 1

    return depth


def lr_factors(params: Any, optim_config, model_config, stacked: frozenset[str]) -> dict[str, Any]:
    """{path: learning-rate factor} for every leaf: multiplier (first matching regex of
    `lr_multipliers`) x layerwise_decay ** (L + 1 - depth), 0 for `frozen` leaves. A factor of a
    stacked leaf is a vector over its layer axis. Leaves with factor 1 are omitted. `stacked`:
    `sharing.stacked_paths(model_config)` (`layer_depths`)."""
    o = OptimConfig.from_config(optim_config)
    multipliers = [(re.compile(p), float(m)) for p, m in _pairs(o.lr_multipliers)]
    frozen = path_matcher(regex_list(o.frozen) or None)
    decay = float(o.layerwise_decay)
    depth = layer_depths(model_config, stacked) if decay != 1.0 else None
    L = model_config.num_layers
    factors = {}

    def one(path, _):
        f = next((m for c, m in multipliers if c.search(path)), 1.0)
        if depth is not None:
            f = f * decay ** (L + 1 - np.asarray(depth(path), np.float64))
        if frozen(path):
            f = 0.0
        if np.any(np.asarray(f) != 1.0):
            factors[path] = np.asarray(f, np.float32)
        return None

    _map_with_path(one, params)
    return factors


def regex_list(value) -> tuple[str, ...]:
    """Regexes from a sequence or a comma-separated string (command-line friendly)."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value or ())


def _pairs(value) -> list[tuple[str, float]]:
    """(regex, multiplier) pairs from a sequence of pairs or 'regex=m,regex=m'."""
    if isinstance(value, str):
        out = []
        for item in regex_list(value):
            regex, sep, m = item.rpartition("=")
            if not sep:
                raise ValueError(f"optim.lr_multipliers: {item!r} is not 'regex=multiplier'")
            out.append((regex, float(m)))
        return out
    return [(str(p), float(m)) for p, m in (value or ())]


def scale_by_path(factors: dict[str, Any]) -> optax.GradientTransformation:
    """u *= factors[path] (a scalar, or a vector broadcast over a stacked leaf's axis 0)."""

    def update_fn(updates, state, params=None):
        def one(path, u):
            if path not in factors:
                return u
            f = jnp.asarray(factors[path], u.dtype)
            return u * f.reshape(f.shape + (1,) * (u.ndim - f.ndim))

        return _map_with_path(one, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def check_patterns(params: Any, optim_config) -> None:
    """Every regex of `optim.lr_multipliers` and `optim.frozen` matches a parameter of `params`
    (a tree): one that matches none (a typo: '^classifer/') would silently do nothing. Auto
    multipliers (None) are not the user's and are not checked."""
    names = []
    _map_with_path(lambda path, _: names.append(path), params)
    o = OptimConfig.from_config(optim_config)
    multipliers = o.lr_multipliers
    fields = {
        "lr_multipliers": [p for p, _ in _pairs(multipliers)] if multipliers is not None else [],
        "frozen": regex_list(o.frozen),
    }
    for field, patterns in fields.items():
        for pattern in patterns:
            if not any(re.search(pattern, name) for name in names):
                groups = ", ".join(sorted({name.split("/")[0] for name in names}))
                raise OptimConfigError(
                    f"optim.{field}: {pattern!r} matches no parameter (the top-level groups: "
                    f"{groups})"
                )


def make_optimizer(
    optim_config, model_config, params: Any = None, stacked: frozenset[str] | None = None
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(clip_by_global_norm(clip_norm) + lamb | adamw [+ per-path lr factors], the lr schedule)
    from an attribute config. `params` (any tree with the model's paths, shapes optional) is
    needed only for `lr_multipliers`, `layerwise_decay` and `frozen`. Leaves whose factor is 0
    (`frozen`, or a multiplier of 0) are `freeze`d: a zero update and no optimizer state.

    Missing fields take `OptimConfig`'s defaults; clip_norm 0 or None turns clipping off.
    `stacked`: the paths with a layer axis (default: those of `model_config`'s layout; a model
    with two encoders, ELECTRA's, names both).
    """
    o = OptimConfig.from_config(optim_config)
    name = o.optimizer()
    own = stacked_paths(model_config)  # the layer axes of `model_config`'s layout, read once
    stacked = own if stacked is None else stacked
    for field in ("learning_rate", "lr_multipliers"):
        if getattr(o, field) is None:  # fine-tuning's "auto": `jobs.run` resolves it by model size
            raise ValueError(f"{field} is None (auto) and was never resolved: set a value")
    schedule = warmup_polynomial_decay(
        o.learning_rate,
        int(o.warmup_steps),
        int(o.total_steps),
        end_lr=o.end_lr,
        power=o.power,
        offset_decay=bool(o.offset_decay),
    )
    kw = dict(
        b1=o.b1,
        b2=o.b2,
        eps=o.eps,
        weight_decay=o.weight_decay,
        exclude=o.exclude,
        bias_correction=bool(o.bias_correction),
    )
    if name == "lamb":
        tx = lamb(schedule, stacked=stacked.__contains__, **kw)
    else:
        tx = adamw(schedule, **kw)
    clip = o.clip_norm
    factors, frozen = {}, set()
    if o.lr_multipliers or o.frozen or float(o.layerwise_decay) != 1:
        if params is None:
            raise ValueError("lr_multipliers / layerwise_decay / frozen need the parameter tree")
        factors = lr_factors(params, optim_config, model_config, own)
        frozen = {path for path, f in factors.items() if not np.any(f)}
    if frozen:  # the clip's norm still counts the frozen gradients, as when they were scaled by 0
        rest = {path: f for path, f in factors.items() if path not in frozen}
        tx = freeze(optax.chain(tx, scale_by_path(rest)) if rest else tx, frozen)
        return (optax.chain(clip_by_global_norm(clip), tx) if clip else tx), schedule
    # Nothing frozen: the state tree of the checkpoints written before `freeze` existed.
    if clip:
        tx = optax.chain(clip_by_global_norm(clip), tx)
    if factors:
        tx = optax.chain(tx, scale_by_path(factors))
    return tx, schedule


FROZEN, TRAINED = "frozen", "trained"


def freeze(tx: optax.GradientTransformation, frozen: set[str]) -> optax.GradientTransformation:
    """`tx` on every leaf but those whose path is in `frozen`, which get a zero update and no
    optimizer state (no Adam moments: a frozen embedding table costs no optimizer memory).
    The other leaves' updates are exactly `tx`'s: its transforms are all per leaf."""

    def labels(tree):
        return _map_with_path(lambda path, _: FROZEN if path in frozen else TRAINED, tree)

    return optax.multi_transform({TRAINED: tx, FROZEN: optax.set_to_zero()}, labels)

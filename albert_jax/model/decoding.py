"""Generation with the UniLM seq2seq head (`albert_jax.model.heads.AlbertForSeq2Seq`): greedy and
beam search, with a key/value cache or, as the reference the cache is checked and timed against, by
recomputing the whole sequence at every step.

Slots: the padded source `[CLS] source [SEP]` fills slots 0..S-1 (its padding is never attended
to) and generated token t goes to slot S + t, with position id `source_length + t` and segment 1,
so every example of a batch continues right after its own source however long it is. The cache
holds every layer's keys and values, [L, B, S + M, N, D] (M = `max_new_tokens`): the source is
encoded once (`prefill`) and each step runs one token per row through the layers.

The search itself is host-side NumPy over log-probabilities (a few hundred candidates per step);
the model calls are jitted with fixed shapes, so nothing recompiles as the output grows. Greedy
decoding with the cache (`generate` with beam_size 1, length_penalty 0) skips the host instead:
`Decoder.greedy` is one jitted call, prefill and a `lax.while_loop` of steps with the argmax on
device, that stops once every row has ended; `beam_search(beam_size=1)` is its reference.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


class Decoder:
    """Jitted step functions of one model: `start(params, source_ids, source_mask)` gives the
    first token's log-probabilities and a state; `step(params, tokens, state, t)` feeds token t
    of every row and gives the next one's. `use_cache=False` recomputes all S + M slots at each
    step (fixed shapes: no recompilation, and the cost of the longest step every time)."""

    def __init__(self, model, max_new_tokens: int, use_cache: bool = True):
        self.model, self.M, self.use_cache = model, max_new_tokens, use_cache
        self._start = jax.jit(self._start_impl)
        self._step = jax.jit(self._step_impl)
        self._greedy = jax.jit(self._greedy_impl)

    # ---- the model calls
    def _apply(self, params, *args, **kw):
        return self.model.apply({"params": params}, *args, method="decode_step", **kw)

    def _start_impl(self, params, ids, mask):
        B, S = ids.shape
        src_len = jnp.sum(mask, axis=1).astype(jnp.int32)
        gen = jnp.zeros((B, self.M), jnp.int32)
        if not self.use_cache:
            state = {"ids": ids, "mask": mask, "src_len": src_len, "gen": gen}
            return self._full(params, state, -1), state
        c = self.model.config
        shape = (c.num_layers, B, S + self.M, c.num_heads, c.head_dim)
        dtype = self.model.execution.dtype
        cache = (jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), 0)
        key_mask = jnp.pad(mask, ((0, 0), (0, self.M)))[:, None, :] * jnp.ones(
            (1, S, 1), mask.dtype
        )
        pos = jnp.broadcast_to(jnp.arange(S), (B, S))
        logits, (k, v) = self._apply(
            params, ids, jnp.zeros_like(ids), pos, key_mask, cache, at=src_len - 1
        )  # the last source token ([SEP]) predicts the first target token
        return jax.nn.log_softmax(logits), {"k": k, "v": v, "mask": mask, "src_len": src_len}

    def _step_impl(self, params, tokens, state, t):
        if not self.use_cache:
            state = {**state, "gen": state["gen"].at[:, t].set(tokens)}
            return self._full(params, state, t), state
        B, S = state["mask"].shape
        slots = jnp.arange(S + self.M)
        key_mask = jnp.concatenate([state["mask"], jnp.zeros((B, self.M), state["mask"].dtype)], 1)
        key_mask = (key_mask > 0) | ((slots >= S) & (slots <= S + t))[None]
        logits, (k, v) = self._apply(
            params, tokens[:, None], jnp.ones((B, 1), jnp.int32), (state["src_len"] + t)[:, None],
            key_mask[:, None, :], (state["k"], state["v"], S + t), at=jnp.zeros((B,), jnp.int32),
        )  # fmt: skip
        return jax.nn.log_softmax(logits), {**state, "k": k, "v": v}

    def _full(self, params, state, t):
        """No cache: the whole slot sequence (generated tokens up to t) under the prefix-LM mask;
        the log-probabilities of the token after slot S + t (t = -1: after the source)."""
        ids, mask, src_len, gen = state["ids"], state["mask"], state["src_len"], state["gen"]
        B, S = ids.shape
        slots = jnp.arange(S + self.M)
        target = slots >= S
        valid = jnp.concatenate([mask > 0, jnp.broadcast_to(slots[S:] <= S + t, (B, self.M))], 1)
        # query i sees key j iff j is valid and (j is source, or i is target and j <= i)
        sees = ~target[None, :] | (target[:, None] & (slots[None, :] <= slots[:, None]))
        pos = jnp.where(target, src_len[:, None] + slots - S, slots)
        types = jnp.broadcast_to(target, (B, S + self.M)).astype(jnp.int32)
        at = jnp.where(t < 0, src_len - 1, S + t) * jnp.ones((B,), jnp.int32)
        ids = jnp.concatenate([ids, gen], 1)
        mask = valid[:, None, :] & sees[None]
        logits, _ = self._apply(params, ids, types, pos, mask, None, at=at)
        return jax.nn.log_softmax(logits)

    def _greedy_impl(self, params, ids, mask, end_id, limit):
        """Greedy decoding on device, at most `limit` (<= M, traced) tokens: (tokens [B, M], each
        row's count of them, model calls). Row b's output is tokens[b, :count[b]] (the end token
        left out, zeros after it)."""
        B, M = ids.shape[0], self.M

        def pick(lp, t, out, n, done):
            tok = jnp.argmax(lp, axis=-1).astype(jnp.int32)
            live = ~done & (tok != end_id)  # rows already ended keep their count
            out = out.at[:, t].set(jnp.where(live, tok, 0))
            return tok, out, jnp.where(live, t + 1, n), done | (tok == end_id)

        def more(c):  # one more step unless at the limit or every row has ended
            return (c[0] + 1 < limit) & ~jnp.all(c[-1])

        def body(c):
            t, calls, state, tok, out, n, done = c
            lp, state = self._step_impl(params, tok, state, t)
            return (t + 1, calls + 1, state, *pick(lp, t + 1, out, n, done))

        lp, state = self._start_impl(params, ids, mask)
        n = jnp.zeros((B,), jnp.int32)
        c = (jnp.int32(0), jnp.int32(1), state,
             *pick(lp, 0, jnp.zeros((B, M), jnp.int32), n, n > 0))  # fmt: skip
        _, calls, _, _, out, n, _ = jax.lax.while_loop(more, body, c)
        return out, n, calls

    # ---- the search's interface
    def start(self, params, source_ids, source_mask):
        lp, state = self._start(params, jnp.asarray(source_ids), jnp.asarray(source_mask))
        return np.asarray(lp, np.float64), state

    def step(self, params, tokens, state, t):
        tokens, t = jnp.asarray(tokens, jnp.int32), jnp.asarray(t, jnp.int32)
        lp, state = self._step(params, tokens, state, t)
        return np.asarray(lp, np.float64), state

    def greedy(self, params, source_ids, source_mask, end_id: int, max_new_tokens=None):
        """Greedy decoding in one call, on device (see `_greedy_impl`): NumPy (tokens [B, M],
        counts [B], model calls made: prefill + steps). One compilation per shape: end_id and
        max_new_tokens (default M) are traced."""
        limit = self.M if max_new_tokens is None else max_new_tokens
        if not 1 <= limit <= self.M:
            raise ValueError(f"max_new_tokens {limit} outside 1..{self.M} (the decoder's M)")
        ids, mask = jnp.asarray(source_ids), jnp.asarray(source_mask)
        scalars = (jnp.asarray(end_id, jnp.int32), jnp.asarray(limit, jnp.int32))
        out, n, calls = self._greedy(params, ids, mask, *scalars)
        return np.asarray(out), np.asarray(n), int(calls)

    @staticmethod
    def reorder(state, rows):
        """The state of rows `rows` (beam bookkeeping); nothing moves when they are in order."""
        rows = np.asarray(rows)
        if rows.shape[0] == state["mask"].shape[0] and np.array_equal(rows, np.arange(len(rows))):
            return state
        return _take_rows(state, jnp.asarray(rows))


@jax.jit
def _take_rows(state, rows):
    # The cache's batch axis is 1 ([L, B, S, N, D]); every other array's is 0.
    return {k: jnp.take(v, rows, axis=1 if k in ("k", "v") else 0) for k, v in state.items()}


@dataclasses.dataclass
class Hypothesis:
    tokens: list[int]  # without the end token
    score: float  # sum of log-probabilities (end token included), length-normalized if asked
    finished: bool  # ended by the end token (not by the length limit)


def beam_search(
    decoder, params, source_ids, source_mask, *, beam_size: int, max_new_tokens: int, end_id: int,
    length_penalty: float = 0.0,
) -> list[list[Hypothesis]]:  # fmt: skip
    """Per example, its finished hypotheses, best first. A hypothesis ends with `end_id` or at
    `max_new_tokens` tokens; its score is the sum of its tokens' log-probabilities divided by
    `length ** length_penalty` (length counts the end token). An example stops once its best
    finished score beats any live one's bound (scores only fall as hypotheses grow), so with
    length_penalty 0 the result is the exact best over everything the beam kept; beam_size 1 is
    greedy decoding."""
    K, M = beam_size, max_new_tokens
    lp, state = decoder.start(params, source_ids, source_mask)
    B, V = lp.shape
    state = decoder.reorder(state, np.repeat(np.arange(B), K))
    lp = np.repeat(lp, K, axis=0)
    scores = np.full((B, K), -np.inf)
    scores[:, 0] = 0.0  # one live hypothesis (the empty one) per example to start from
    seqs: list[list[list[int]]] = [[[] for _ in range(K)] for _ in range(B)]
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    done = np.zeros(B, bool)
    norm = lambda s, n: s / (n**length_penalty)
    for t in range(M):
        cand = (scores[:, :, None] + lp.reshape(B, K, V)).reshape(B, K * V)
        top = np.argpartition(-cand, min(2 * K, K * V) - 1, axis=1)[:, : 2 * K]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(cand, top, 1), 1), 1)
        new_scores = np.full((B, K), -np.inf)
        parents, tokens = np.zeros((B, K), np.int64), np.zeros((B, K), np.int64)
        new_seqs: list[list[list[int]]] = [[[] for _ in range(K)] for _ in range(B)]
        for b in np.nonzero(~done)[0]:
            k = 0
            for c in top[b]:
                s = cand[b, c]
                if not np.isfinite(s) or k == K:
                    break
                beam, tok = divmod(int(c), V)
                seq = seqs[b][beam]
                if tok == end_id or t == M - 1:
                    ended = tok == end_id
                    finished[b].append(
                        Hypothesis(seq if ended else [*seq, tok], norm(s, t + 1), ended)
                    )
                    continue
                new_scores[b, k], parents[b, k], tokens[b, k] = s, beam, tok
                new_seqs[b][k] = [*seq, tok]
                k += 1
            best_live = new_scores[b].max()
            bound = norm(best_live, M) if length_penalty > 0 else best_live
            if finished[b] and max(h.score for h in finished[b]) >= bound:
                done[b] = True
        if done.all() or t == M - 1:
            break
        scores, seqs = new_scores, new_seqs
        state = decoder.reorder(state, (np.arange(B)[:, None] * K + parents).reshape(-1))
        lp, state = decoder.step(params, tokens.reshape(-1), state, t)
    return [sorted(f, key=lambda h: -h.score) for f in finished]


def generate(decoder, params, source_ids, source_mask, **kw) -> list[list[int]]:
    """The best hypothesis's tokens per example (see `beam_search`). Greedy (beam_size 1) with
    the cache runs on device (`Decoder.greedy`, the same tokens) unless length_penalty is set:
    beam_search's beam of one then keeps going past an end token whose normalized score is
    below the bound, which is no longer plain greedy."""
    if kw["beam_size"] == 1 and not kw.get("length_penalty") and getattr(decoder, "use_cache", 0):
        out, n, _ = decoder.greedy(
            params, source_ids, source_mask, kw["end_id"], kw["max_new_tokens"]
        )
        return [row[:k].tolist() for row, k in zip(out, n, strict=True)]
    hyps = beam_search(decoder, params, source_ids, source_mask, **kw)
    return [h[0].tokens for h in hyps]

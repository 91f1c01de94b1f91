"""UniLM seq2seq: the prefix-LM mask (by output invariance), cached decoding equal to the full
forward pass and to decoding without the cache, beam search against exhaustive search, greedy =
beam 1, greedy on device = beam 1 on the host (and stopping once every row has ended), and
fine-tuning end to end with generation over whole splits (unshared from the command
line: tests/integration/test_finetune_cli.py)."""

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import random_params, tiny_config
from support.seq2seq import s2s_config

from albert_jax.checkpoints import checkpoint
from albert_jax.jobs import run as runs
from albert_jax.model.config import Execution
from albert_jax.model.decoding import Decoder, beam_search, generate
from albert_jax.model.heads import AlbertForSeq2Seq, prefix_lm_mask


def test_prefix_lm_mask_rule():
    types = jnp.array([[0, 0, 0, 1, 1, 0]])  # two source, [SEP], two target pieces, padding
    mask = jnp.array([[1, 1, 1, 1, 1, 0]])
    m = np.asarray(prefix_lm_mask(types, mask)[0]).astype(int)
    expected = np.array(
        [[1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0],
         [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]]
    )  # fmt: skip
    np.testing.assert_array_equal(m, expected)


@pytest.mark.parametrize("layout", ["all", "none"])
def test_source_cannot_see_target_and_target_cannot_see_its_future(layout):
    c = tiny_config(layout)
    model = AlbertForSeq2Seq(c)
    params = random_params(model)
    ids = jnp.asarray(np.random.default_rng(0).integers(5, 97, (1, 10)), jnp.int32)
    types = jnp.asarray([[0] * 5 + [1] * 5])

    def seq(x):
        return model.apply({"params": params}, x, types).sequence_output[0]

    base = seq(ids)
    changed = seq(ids.at[0, 7].set(3))  # a target token
    np.testing.assert_array_equal(base[:7], changed[:7])  # source and earlier target: unmoved
    assert np.abs(base[7:] - changed[7:]).max() > 1e-3
    moved = seq(ids.at[0, 2].set(3))  # a source token reaches every position
    assert np.abs(base - moved).max(axis=-1).min() > 1e-4


@pytest.mark.parametrize(
    "layout,scan",
    [("all", True), pytest.param("none", False, marks=pytest.mark.slow),
     pytest.param("groups:2", True, marks=pytest.mark.slow)],
)  # fmt: skip
def test_cached_steps_equal_the_full_forward_pass(layout, scan):
    """Teacher-forced: prefill + one cached step per target token gives the log-probabilities
    of one full pass over `[CLS] source [SEP] target` (sources of different lengths padded)."""
    c = tiny_config(layout, max_position_embeddings=32)
    model = AlbertForSeq2Seq(c, Execution(scan_layers=scan))
    params = random_params(model)
    rng = np.random.default_rng(1)
    S, M = 7, 5
    src = rng.integers(5, 97, (2, S)).astype(np.int32)
    mask = np.ones((2, S), np.int32)
    mask[0, 4:], src[0, 4:] = 0, 0
    tgt = rng.integers(5, 97, (2, 4)).astype(np.int32)
    for use_cache in (True, False):
        dec = Decoder(model, M, use_cache=use_cache)
        lp, state = dec.start(params, src, mask)
        steps = [lp]
        for t in range(4):
            lp, state = dec.step(params, tgt[:, t], state, t)
            steps.append(lp)
        steps = np.stack(steps, 1)  # [B, 5, V]
        for b in range(2):
            n = int(mask[b].sum())
            ids = jnp.asarray(np.concatenate([src[b, :n], tgt[b]])[None])
            types = jnp.asarray([[0] * n + [1] * 4])
            full = jax.nn.log_softmax(model.apply({"params": params}, ids, types).logits)[0]
            np.testing.assert_allclose(steps[b], full[n - 1 :], atol=2e-5)


class TableDecoder:
    """A fake model: log-probabilities depend on the previous token and the step only."""

    def __init__(self, V, M, seed=0):
        logits = np.random.default_rng(seed).normal(size=(M + 1, V + 1, V)) * 2
        self.table = logits - np.log(np.exp(logits).sum(-1, keepdims=True))

    def start(self, params, ids, mask):
        B = len(ids)
        return self.table[0, np.full(B, -1)], {"prev": np.full(B, -1)}

    def step(self, params, tokens, state, t):
        return self.table[t + 1, tokens], {"prev": np.asarray(tokens)}

    @staticmethod
    def reorder(state, rows):
        return {"prev": state["prev"][np.asarray(rows)]}


def exhaustive(dec, V, M, end, alpha):
    best = (-np.inf, None)
    for n in range(1, M + 1):
        for seq in itertools.product(range(V), repeat=n):
            if end in seq[:-1] or (n < M and seq[-1] != end):
                continue  # ends with `end`, or runs to the limit without it
            prev, s = -1, 0.0
            for t, tok in enumerate(seq):
                s += dec.table[t, prev, tok]
                prev = tok
            s /= n**alpha
            if s > best[0]:
                best = (s, [x for x in seq if x != end])
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_equals_exhaustive_search_and_beam_one_is_greedy(alpha):
    V, M, end = 4, 4, 0
    for seed in range(5):
        dec = TableDecoder(V, M, seed)
        ids, mask = np.zeros((1, 2)), np.ones((1, 2))
        wide = beam_search(dec, None, ids, mask, beam_size=V**M, max_new_tokens=M, end_id=end,
                           length_penalty=alpha)[0][0]  # fmt: skip
        score, tokens = exhaustive(dec, V, M, end, alpha)
        assert wide.tokens == tokens and wide.score == pytest.approx(score)
        one = beam_search(dec, None, ids, mask, beam_size=1, max_new_tokens=M, end_id=end)[0][0]
        prev, greedy = -1, []
        for t in range(M):
            tok = int(np.argmax(dec.table[t, prev]))
            if tok == end:
                break
            greedy.append(tok)
            prev = tok
        assert one.tokens == greedy


def test_device_greedy_equals_beam_one_and_stops_when_every_row_has_ended():
    """`Decoder.greedy` (one jitted while_loop) against the host search's beam of one, on sources
    of different lengths, with an end token some rows emit at different steps and one never."""
    model = AlbertForSeq2Seq(tiny_config("all", max_position_embeddings=32))
    params = random_params(model)
    rng = np.random.default_rng(2)
    B, S, M = 5, 9, 8
    lens = np.array([9, 4, 7, 2, 6])
    mask = (np.arange(S)[None] < lens[:, None]).astype(np.int32)
    src = np.where(mask > 0, rng.integers(5, 97, (B, S)), 0).astype(np.int32)
    dec = Decoder(model, M)

    def host(rows, end, m=M):
        hyps = beam_search(dec, params, src[rows], mask[rows], beam_size=1, max_new_tokens=m,
                           end_id=end)  # fmt: skip
        return [h[0].tokens for h in hyps]

    free = host(slice(None), -1)  # never ends: the M greedy tokens of every row
    out, n, calls = dec.greedy(params, src, mask, -1)
    assert out.tolist() == free and n.tolist() == [M] * B and calls == M
    # The end token: one that some rows emit (not first) and some never do.
    end = next(v for v in sorted({x for r in free for x in r})
               if 0 < sum(v in r for r in free) < B and any(v in r[1:] for r in free))  # fmt: skip
    first = [r.index(end) if end in r else M for r in free]
    expected = [r[:k] for r, k in zip(free, first, strict=True)]
    assert host(slice(None), end) == expected
    out, n, calls = dec.greedy(params, src, mask, end)
    assert n.tolist() == first and [r[:k] for r, k in zip(out.tolist(), n, strict=True)] == expected
    assert calls == M  # a row never ends
    kw = dict(beam_size=1, max_new_tokens=M - 3, end_id=end)
    assert generate(dec, params, src, mask, **kw) == host(slice(None), end, M - 3)
    # Only the rows that end before the last step: the loop stops after the last of them ends.
    early = [b for b in range(B) if first[b] < M - 1]
    assert early and max(first[b] for b in early) < M - 1
    out, n, calls = dec.greedy(params, src[early], mask[early], end)
    assert calls == max(first[b] for b in early) + 1 < M
    assert [r[:k] for r, k in zip(out.tolist(), n, strict=True)] == host(early, end)


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_seq2seq_trains_and_writes_predictions(pretrained, s2s_files, tmp_path):
    runs.run(s2s_config(pretrained, s2s_files), str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    assert results["metric"] == "f1"
    for key in ("exact_match", "f1", "bleu", "rouge_l", "loss", "token_accuracy"):
        assert np.isfinite(results["dev"][key]), key
    dev = [json.loads(x) for x in open(tmp_path / "predictions" / "dev.jsonl")]
    gold = [json.loads(x) for x in open(s2s_files / "dev.jsonl")]
    assert [r["source"] for r in dev] == [g["source"] for g in gold]  # all 7, in order
    assert all(len(r["prediction"].split()) <= 5 for r in dev)  # max_target_length pieces
    config, params = checkpoint.load(tmp_path / "best")
    head = checkpoint.load_head(tmp_path / "best")
    assert head["type"] == "seq2seq" and "mlm" in params and "classifier" not in params
    assert config.layout == "all"
    # finetune.predict on sources alone (generated), then on the dev file (scored as in training)
    src = tmp_path / "sources.jsonl"
    src.write_text("".join(json.dumps({"source": g["source"]}) + "\n" for g in gold))
    assert runs.predict_file(str(tmp_path / "best"), str(src), str(tmp_path / "out.jsonl")) == {}
    out = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    assert [r["prediction"] for r in out] == [r["prediction"] for r in dev]
    values = runs.predict_file(str(tmp_path / "best"), str(s2s_files / "dev.jsonl"),
                            str(tmp_path / "out2.jsonl"))  # fmt: skip
    assert values["f1"] == pytest.approx(results["dev"]["f1"])

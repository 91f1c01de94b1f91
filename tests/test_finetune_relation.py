"""Relation extraction end to end: DuIE reading with named errors, pieces that map back to the
entities, span decoding that never leaves the text, exact-triple P/R/F1, the conditional
LayerNorm, the loss targets, training from a checkpoint (shared and unshared) and evaluation of
every text once, and the People's Daily triples."""

import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tiny_config
from support.finetune import TOKENIZER
from support.relation import N_DEV, re_config

from albert_jax.checkpoints import checkpoint, hf
from albert_jax.checkpoints.errors import ConversionError
from albert_jax.configs.finetune.common import get_common
from albert_jax.data.finetuning.records import DataError
from albert_jax.experiments import extraction
from albert_jax.jobs import run as runs
from albert_jax.model.albert import LayerNorm, init_params
from albert_jax.model.heads import ConditionalLayerNorm
from albert_jax.tasks import relation as R
from albert_jax.tasks.finetuning import FinetuneTask
from albert_jax.text.tokenization import load_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "tests", "fixtures", "formats", "duie_sample.jsonl")


# ---------------------------------------------------------------- reading and features


def test_bad_duie_lines_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ab", "spo_list": []}\n{"text": "ab", "spo_list": [}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: malformed JSON"):
        R.read_duie(bad)
    bad.write_text('{"text": "ab"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: missing key 'spo_list'"):
        R.read_duie(bad)
    bad.write_text('\n{"text": "ab", "spo_list": [{"predicate": "p", "object": "b"}]}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: spo_list\[0\]: missing key 'subject'"):
        R.read_duie(bad)
    bad.write_text('{"text": "ab", "spo_list": [{"subject": "a", "predicate": "p", "object": {}}]}')
    with pytest.raises(DataError, match=r"spo_list\[0\].object: missing key '@value'"):
        R.read_duie(bad)
    # An entity not in the text: that triple is skipped and counted, the text stays.
    spo = [
        {"subject": "a", "predicate": "p", "object": "b"},
        {"subject": "a", "predicate": "q", "object": "zz"},
    ]
    bad.write_text(json.dumps({"text": "ab", "spo_list": spo}))
    examples, counts = R.read_duie(bad)
    assert counts == {"triples": 1, "not_found": 1, "duplicates": 0}
    assert examples[0].gold() == {("a", "p", "b")}


def test_duie_sample_reads_and_its_pieces_map_back_to_the_entities():
    examples, counts = R.read_duie(SAMPLE)
    assert counts == {"triples": 10, "not_found": 1, "duplicates": 0}  # 方文山 is not in line 3
    assert [len(e.triples) for e in examples] == [2, 2, 1, 3, 2, 0]
    by_line = {e.where.rsplit(":", 1)[1]: e for e in examples}
    # DuIE 2.0 objects ({"@value": ...}); two triples share a subject; 北京 inside 北京大学.
    assert ("霸王别姬", "主演", "巩俐") in by_line["4"].gold()
    shared = by_line["2"].triples
    assert {t.subject for t in shared} == {"北京大学"} and shared[0].object_start == 0
    predicates = sorted({t.predicate for e in examples for t in e.triples})
    tok = load_tokenizer(TOKENIZER)
    feats, stats = R.featurize_relations(examples, tok, 24, predicates)
    assert stats["truncated"] == 1 and stats["triples_cut"] == 1  # 出版社 of line 1 is cut off
    assert stats["triples"] == 9 and stats["unaligned"] == 0
    for n, ex in enumerate(examples):
        off = feats["offsets"][n]
        got = {
            (R.spans_text(ex.text, off, t[0], t[1]), predicates[t[2]],
             R.spans_text(ex.text, off, t[3], t[4]))
            for t in feats["triples"][n] if t[0] >= 0
        }  # fmt: skip
        assert got <= ex.gold() and len(got) >= len(ex.gold()) - (n == 0)
        starts, ends = np.nonzero(feats["subject_labels"][n, :, 0])[0], feats["subjects"][n]
        assert sorted(starts) == sorted(s for s, _ in ends if s >= 0)


# ---------------------------------------------------------------- decoding and metrics


def test_span_decoding_stays_inside_the_text():
    # [CLS] t1 t2 t3 t4 t5 [SEP] pad: text positions 1..5.
    mask = jnp.asarray([[1, 1, 1, 1, 1, 1, 1, 0]])
    valid = R.text_mask(mask)
    assert valid.tolist() == [[False, True, True, True, True, True, False, False]]
    start = jnp.asarray([[0.9, 0.9, 0.1, 0.8, 0.1, 0.9, 0.9, 0.9]])
    end = jnp.asarray([[0.9, 0.1, 0.7, 0.9, 0.1, 0.1, 0.9, 0.9]])
    ends = R.decode_spans(start, end, valid, max_len=8)
    # [CLS] / [SEP] / pad open nothing; 1 -> nearest end 2 (not 3); 3 -> 3 (one piece); 5 has
    # no end before [SEP] (the end on [SEP] does not count).
    assert ends.tolist() == [[-1, 2, -1, 3, -1, -1, -1, -1]]
    assert R.decode_spans(start, end, valid, max_len=1).tolist() == [
        [-1, -1, -1, 3, -1, -1, -1, -1]
    ]
    # An invalid position between a start and the next end closes nothing (no crossing).
    hole = valid.at[0, 2].set(False)
    assert R.decode_spans(start, end.at[0, 2].set(0.0), hole, 8).tolist()[0][1] == -1
    # First spans in text order, k of them, -1 filled.
    assert R.first_spans(ends, 1).tolist() == [[[1, 2]]]
    assert R.first_spans(ends, 3).tolist() == [[[1, 2], [3, 3], [-1, -1]]]
    # Random probabilities: every span is inside the text with end >= start.
    rng = np.random.default_rng(0)
    p = jnp.asarray(rng.random((50, 2, 8)))
    masks = jnp.asarray((np.arange(8) < rng.integers(2, 9, 50)[:, None]).astype(np.int32))
    e = np.asarray(R.decode_spans(p[:, 0], p[:, 1], R.text_mask(masks), 4))
    v = np.asarray(R.text_mask(masks))
    for row, ok in zip(e, v, strict=True):
        for s in np.nonzero(row >= 0)[0]:
            assert ok[s] and ok[row[s]] and s <= row[s] < s + 4 and ok[s : row[s] + 1].all()


def test_triples_decode_from_packed_outputs_and_score_micro():
    text = "AB CD"
    offsets = np.asarray([[-1, -1], [0, 1], [1, 2], [3, 4], [4, 5], [-1, -1]])
    subjects = np.asarray([[1, 2], [3, 3], [-1, -1]])  # AB, C, none
    ends = np.full((3, 2, 6), -1)
    ends[0, 1, 3] = 4  # AB -q-> CD
    ends[1, 0, 1] = 1  # C -p-> A
    ends[2, 0, 1] = 2  # no subject: ignored
    got = R.decode_triples(text, offsets, subjects, ends, ["p", "q"])
    assert got == {("AB", "q", "CD"), ("C", "p", "A")}
    packed = np.concatenate([subjects, ends.reshape(3, -1)], -1)[None]
    s, e = R.unpack(packed, 2)
    assert (s[0] == subjects).all() and (e[0] == ends).all()
    gold = [{("a", "p", "b"), ("a", "q", "c")}, {("x", "p", "y")}, set()]
    pred = [{("a", "p", "b")}, {("x", "p", "z"), ("x", "q", "y")}, {("u", "p", "v")}]
    m = R.triple_metrics(gold, pred)  # counts over texts: 1 right of 4 predicted, 3 gold
    assert m == pytest.approx({"precision": 1 / 4, "recall": 1 / 3, "f1": 2 / 7})
    assert R.triple_metrics([set()], [set()]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert R.triple_metrics(gold, gold)["f1"] == 1.0


# ---------------------------------------------------------------- the head and the loss targets


def test_conditional_layernorm_is_a_plain_layernorm_at_init():
    c = tiny_config()
    x = jax.random.normal(jax.random.key(0), (2, 1, 5, c.hidden_size))
    cond = jax.random.normal(jax.random.key(1), (2, 3, 1, 2 * c.hidden_size))
    cln = ConditionalLayerNorm(c)
    params = nn.meta.unbox(cln.init(jax.random.key(2), x, cond)["params"])
    plain = LayerNorm(c).apply({"params": {"scale": params["scale"], "bias": params["bias"]}}, x)
    y = cln.apply({"params": params}, x, cond)
    assert y.shape == (2, 3, 5, c.hidden_size)
    np.testing.assert_allclose(y, jnp.broadcast_to(plain, y.shape), atol=1e-6)
    # Trained (non-zero) condition weights make each subject's normalisation its own.
    params = {**params, "condition": jnp.full_like(params["condition"], 0.01)}
    y = cln.apply({"params": params}, x, cond)
    assert not np.allclose(y[:, 0], y[:, 1], atol=1e-3)


def test_sampled_subjects_and_their_object_labels():
    subjects = jnp.asarray([[[1, 2], [4, 4]], [[-1, -1], [-1, -1]]])
    triples = jnp.asarray(
        [[[1, 2, 0, 4, 5], [4, 4, 1, 1, 2], [1, 2, 1, 6, 6]], [[-1] * 5] * 3]
    )  # fmt: skip
    span, has = R.sample_subjects(subjects, None)
    assert span.tolist() == [[1, 2], [0, 0]] and has.tolist() == [True, False]
    seen = {tuple(R.sample_subjects(subjects, jax.random.key(i))[0][0].tolist()) for i in range(20)}
    assert seen == {(1, 2), (4, 4)}  # both subjects of row 0 get sampled, padding never
    labels = R.object_labels(triples, span, T=8, P=2)
    assert labels.shape == (2, 8, 2, 2)
    hot = {tuple(i) for i in np.argwhere(np.asarray(labels) > 0)}
    # Subject (1, 2): object 4..5 for predicate 0 and 6..6 for predicate 1; (4, 4)'s not here.
    assert hot == {(0, 4, 0, 0), (0, 5, 0, 1), (0, 6, 1, 0), (0, 6, 1, 1)}


def test_loss_uses_the_global_batch_counts(model_from):
    """The loss of a batch equals the sum of its halves' losses under the whole batch's
    normalizers (how gradient accumulation and data parallelism split it)."""
    config = get_common("relation")
    config.task.update(train=SAMPLE, max_seq_length=24)
    config.model_from = model_from
    task = FinetuneTask.from_config(config, load_tokenizer(TOKENIZER), splits=("train",))
    batch = {k: jnp.asarray(v) for k, v in task.data.features["train"].items()}
    params = jax.jit(lambda key: init_params(task.model, key))(jax.random.key(0))
    loss_fn = jax.jit(task.loss)
    norms = task.normalizers(batch)
    loss, aux = loss_fn(params, batch, norms, None)
    halves = [{k: v[i : i + 3] for k, v in batch.items()} for i in (0, 3)]
    parts = [loss_fn(params, h, norms, None) for h in halves]
    assert float(sum(p[0] for p in parts)) == pytest.approx(float(loss), rel=1e-5)
    assert float(aux["object_loss"]) > 0 and float(aux["subject_loss"]) > 0
    # A row without triples (the sample's last line) adds no object terms.
    last = {k: v[5:] for k, v in batch.items()}
    assert float(loss_fn(params, last, task.normalizers(last), None)[1]["object_loss"]) == 0


# ---------------------------------------------------------------- end to end


@pytest.mark.parametrize("unshare", ["", "all"])
def test_relation_trains_and_scores_every_text_once(pretrained, re_files, tmp_path, unshare):
    summary = runs.run(re_config(pretrained, re_files, unshare=unshare), str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    assert results["metric"] == "f1" and summary["layout"] == ("none" if unshare else "all")
    dev = [json.loads(x) for x in open(tmp_path / "predictions" / "dev.jsonl")]
    lines = open(re_files / "dev.jsonl").read().splitlines()
    assert [r["where"] for r in dev] == [f"dev.jsonl:{i + 1}" for i in range(N_DEV)]
    for r, line in zip(dev, lines, strict=True):
        assert r["text"] == json.loads(line)["text"]
        words = r["text"].split()
        subjects = {t["subject"] for t in r["predicted"]}
        assert words[0] in subjects and subjects <= set(words[:3])
        assert {t["object"] for t in r["predicted"]} <= set(words)
        assert {t["predicate"] for t in r["predicted"]} == {"has", "near"}
    # The written predictions give the reported metrics (every text counted once).
    triples = [[{tuple(t.values()) for t in r[k]} for r in dev] for k in ("spo_list", "predicted")]
    assert R.triple_metrics(*triples)["f1"] == pytest.approx(results["dev"]["f1"])
    assert results["dev"]["recall"] > 0
    head = checkpoint.load_head(tmp_path / "best")
    assert head["type"] == "relation_extraction" and head["predicates"] == ["has", "near"]
    config, params = checkpoint.load(tmp_path / "best")
    assert params["classifier"]["object"]["kernel"].shape == (32, 4)
    assert config.layout == ("none" if unshare else "all")
    with pytest.raises(ConversionError, match="'relation_extraction' head cannot be written"):
        hf.hf_tensors(config, params, head)


# ---------------------------------------------------------------- People's Daily triples


def test_peoples_daily_rules_on_tagged_sentences():
    items = extraction.people(
        [("美国", "ns"), ("总统", "n"), ("克林顿", "nr"), ("会见", "v"), ("国务院", "nt"),
         ("副", "b"), ("总理", "n"), ("李", "nr"), ("岚清", "nr"), ("和", "c"), ("江", "nr"),
         ("主席", "n"), ("，", "w"), ("李", "nr"), ("鹏", "nr"), ("乔", "nr"), ("石", "nr")]
    )  # fmt: skip
    assert ("李岚清", "nr") in items and ("李鹏乔石", "nr?") in items  # 4 tokens: no person
    triples, ambiguous = extraction.sentence_triples(items)
    assert [tuple(t.values()) for t in triples] == [
        ("克林顿", "职务", "总统"),
        ("克林顿", "所属地区", "美国"),
        ("李岚清", "职务", "副总理"),
        ("李岚清", "所属机构", "国务院"),
    ]  # 江 主席: a surname alone is no person
    assert ambiguous == 0
    # The title occurs earlier in the sentence: the reader would locate it there, so dropped.
    items = [("总统", "n"), ("说", "v"), ("，", "w"), ("总统", "n"), ("克林顿", "nr")]
    assert extraction.sentence_triples(items) == ([], 1)
    assert extraction.sentence_triples([("克林顿", "nr"), ("总统", "n")])[0] == [
        {"subject": "克林顿", "predicate": "职务", "object": "总统"}
    ]


@pytest.mark.slow
def test_relations_dataset_builds_and_reads(tmp_path):
    from albert_jax.experiments import datasets

    stats = datasets.prepare("relations", tmp_path / "re")
    assert set(stats["predicates"]) == {"职务", "所属地区", "所属机构"}
    assert all(stats["splits"][s]["without_triples"] > 0 for s in ("train", "dev", "test"))
    for split in ("train", "dev", "test"):
        examples, counts = R.read_duie(tmp_path / "re" / f"{split}.jsonl")
        assert counts["not_found"] == 0 and counts["duplicates"] == 0
        assert counts["triples"] == stats["splits"][split]["triples"]

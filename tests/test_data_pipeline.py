"""The grain pipeline on the real People's Daily corpus: statistics, determinism, resume, shards,
and bad input. The corpus and tokenizer are built once per session (the `pd_data` fixture,
tests/conftest.py); tests/integration/test_data_cli.py resumes in a fresh process."""

from __future__ import annotations

import json
import logging

import ml_collections
import numpy as np
import pytest
from absl import flags
from support.masking import reference_spans, two_sample_close
from support.pipeline import cfg, take

from albert_jax.data.pretraining import corpus, masking, pipeline
from albert_jax.data.pretraining.documents import (
    doc_sentences,
    split_sentences,
    strip_tags,
    tokenize_documents,
)
from albert_jax.pretrain.inspect_data import iter_examples, render, summarize
from albert_jax.text.tokenization import CLS_ID, MASK_ID, SEP_ID, TokenizerError

if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()  # grain workers read absl flags


def assert_same(xs, ys):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def test_corpus_build_and_round_trip(pd_data, pd_tokenizer):
    d, stats = pd_data
    assert stats.documents > 2000 and stats.sentences > 40000
    assert stats.invalid_utf8_lines == 0 and stats.empty_documents == 0
    src = corpus.open_source(d)
    assert len(src) == stats.documents
    docs = corpus.read_documents(d.input_files, "tagged")
    first = next(docs)
    rec = next(src[i] for i in range(len(src)) if src[i]["doc_index"] == 0)
    assert rec["ids"].dtype == np.int32 and rec["word_starts"].dtype == np.bool_
    assert rec["sentence_lengths"].sum() == len(rec["ids"]) == len(rec["word_starts"])
    sents = doc_sentences(rec)
    assert len(sents) == len(first)
    for s, text in zip(sents, first, strict=True):
        assert s.tolist() == pd_tokenizer.encode(text)


def test_statistics_on_peoples_daily(pd_config, capsys):
    d = cfg(pd_config, debug=True, global_batch_size=50, shuffle_window=0)
    examples = list(iter_examples(take(d, 60)))  # 3000 examples
    assert len(examples) == 3000
    S, P = d.max_seq_length, d.max_predictions
    for ex in examples:
        L, la = int(ex["length"]), int(ex["len_a"])
        ids, seg, mask = ex["input_ids"], ex["segment_ids"], ex["input_mask"]
        assert ids.shape == (S,) and ex["masked_lm_positions"].shape == (P,)
        assert ex["original_ids"][0] == CLS_ID
        assert ex["original_ids"][la + 1] == SEP_ID and ex["original_ids"][L - 1] == SEP_ID
        assert np.all(mask[:L] == 1) and np.all(mask[L:] == 0) and np.all(ids[L:] == 0)
        assert np.all(seg[: la + 2] == 0) and np.all(seg[la + 2 : L] == 1) and np.all(seg[L:] == 0)
        k = int(ex["num_masked"])
        assert k == masking.num_to_predict(L, P, d.masked_lm_prob), "budget formula"
        assert np.all(ex["masked_lm_weights"][:k] == 1) and np.all(ex["masked_lm_weights"][k:] == 0)
        pos = ex["masked_lm_positions"][:k]
        np.testing.assert_array_equal(ex["masked_lm_ids"][:k], ex["original_ids"][pos])
        assert not np.isin(pos, [0, la + 1, L - 1]).any()
    s = summarize(examples, P, d.masked_lm_prob)
    with capsys.disabled():
        print("\nPeople's Daily statistics (seq 128, max_predictions 20):", json.dumps(s))

    # Span lengths vs the reference loop run on the same word boundaries and budgets.
    import random

    rnd = random.Random(0)
    probs = masking.ngram_probs(3)
    ref = np.zeros(4, int)
    for ex in examples:
        L, la = int(ex["length"]), int(ex["len_a"])
        special = np.zeros(L, bool)
        special[[0, la + 1, L - 1]] = True
        _, spans = reference_spans(ex["token_boundary"][:L], special, int(ex["budget"]), rnd, probs)
        ref += np.bincount(spans, minlength=4)
    ours = np.sum([ex["span_counts"] for ex in examples], axis=0)
    two_sample_close(ours, ref[1:])
    frac = ours / ours.sum()
    assert frac[0] > frac[1] > frac[2]

    # 80/10/10.
    m = s["masked_tokens"]
    for got, p in zip(s["frac_mask_kept_random"], (0.8, 0.1, 0.1), strict=True):
        assert abs(got - p) <= 5 * np.sqrt(p * (1 - p) / m) + 1e-4, (got, p)

    # SOP: swapped vs natural balanced among >= 2-segment chunks; single ones are random-doc 1.
    multi = [ex for ex in examples if ex["num_chunk_segments"] >= 2]
    sw = np.mean([bool(ex["swapped"]) for ex in multi])
    assert abs(sw - 0.5) <= 5 * np.sqrt(0.25 / len(multi))
    assert all(int(ex["sentence_order_label"]) == int(ex["swapped"]) for ex in multi)
    single = [ex for ex in examples if ex["num_chunk_segments"] == 1]
    assert single and all(ex["random_doc"] and ex["sentence_order_label"] == 1 for ex in single)
    assert s["label_rate"] > 0.5  # the reference's bias: single-segment chunks add label 1

    # Short targets: drawn once per document with probability short_seq_prob.
    first = [ex for ex in examples if ex["instance_index"] == 0]
    short = np.mean([bool(ex["short_target"]) for ex in first])
    p = d.short_seq_prob
    assert abs(short - p) <= 5 * np.sqrt(p * (1 - p) / len(first))
    # Masked positions shown as [MASK] really are the masked ones.
    assert all(
        set(np.flatnonzero(ex["input_ids"] == MASK_ID))
        <= set(ex["masked_lm_positions"][: int(ex["num_masked"])].tolist())
        for ex in examples
    )


def test_split_option_balances_labels(pd_config, capsys):
    d = cfg(pd_config, debug=True, global_batch_size=50, single_segment="split")
    examples = list(iter_examples(take(d, 30)))
    s = summarize(examples, d.max_predictions, d.masked_lm_prob)
    with capsys.disabled():
        print("\nsingle_segment='split':", json.dumps(s))
    labels = np.array([int(ex["sentence_order_label"]) for ex in examples])
    assert abs(labels.mean() - 0.5) <= 5 * np.sqrt(0.25 / len(labels))
    assert s["random_doc_rate"] < 0.01


def test_nsp_mode(pd_config):
    d = cfg(pd_config, debug=True, global_batch_size=50, mode="nsp")
    examples = list(iter_examples(take(d, 20)))
    assert not any(bool(ex["swapped"]) for ex in examples)
    multi = [ex for ex in examples if ex["num_chunk_segments"] >= 2]
    r = np.mean([bool(ex["random_doc"]) for ex in multi])
    assert abs(r - 0.5) <= 5 * np.sqrt(0.25 / len(multi))


def test_deterministic_across_runs_and_worker_counts(pd_config):
    d = cfg(pd_config, global_batch_size=8, max_seq_length=64, shuffle_window=64)
    a = take(d, 6, worker_count=0)
    b = take(d, 6, worker_count=0)
    assert_same(a, b)
    c = take(d, 6, worker_count=2)
    assert_same(a, c)
    e = take(cfg(d, seed=d.seed + 1), 6, worker_count=0)
    assert not np.array_equal(a[0]["input_ids"], e[0]["input_ids"])


def test_epochs_reshuffle_and_cover():
    docs = [_record([[i + 10, i + 11], [i + 12]]) for i in range(5)]
    d = cfg(_synthetic_config(), debug=True, global_batch_size=1, shuffle_window=0)
    ds = pipeline.make_dataset(d, source=docs, check_tokenizer=False, num_epochs=3)
    ex = [b for b in ds]
    ep = np.array([int(b["epoch"][0]) for b in ex])
    ids = np.array([int(b["doc_id"][0]) for b in ex])
    orders = [ids[ep == e].tolist() for e in range(3)]
    assert all(sorted(set(o)) == list(range(5)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1


def test_masks_are_redrawn_every_epoch():
    """Masking is seeded by (seed, epoch, document, instance): an instance whose text comes out
    the same in two epochs (SOP swaps it half the time) is masked afresh, not identically."""
    rng = np.random.default_rng(1)
    docs = [_record([rng.integers(5, 500, 12), rng.integers(5, 500, 12)]) for _ in range(40)]
    d = cfg(_synthetic_config(), debug=True, global_batch_size=1, shuffle_window=0)
    d.short_seq_prob = 0.0
    ds = pipeline.make_dataset(d, source=docs, check_tokenizer=False, num_epochs=2)
    seen = [{}, {}]
    for b in ds:
        key = (int(b["doc_id"][0]), int(b["instance_index"][0]))
        seen[int(b["epoch"][0])][key] = (b["original_ids"][0], b["masked_lm_positions"][0])
    same = [k for k, (ids, _) in seen[0].items() if np.array_equal(ids, seen[1][k][0])]
    assert len(same) >= 10
    repeated = sum(np.array_equal(seen[0][k][1], seen[1][k][1]) for k in same)
    assert repeated <= len(same) // 4, (repeated, len(same))


@pytest.mark.slow
def test_resume_in_process_with_workers(pd_config):
    d = cfg(pd_config, global_batch_size=4, max_seq_length=64, worker_count=2, shuffle_window=64)
    it = pipeline.make_iterator(d)
    for _ in range(5):
        next(it)
    state = pipeline.state_from_json(pipeline.state_to_json(it.get_state()))
    want = [next(it) for _ in range(4)]
    it.close()
    it2 = pipeline.make_iterator(d)
    it2.set_state(state)
    got = [next(it2) for _ in range(4)]
    it2.close()
    assert_same(want, got)


def _record(sentences, starts=None):
    ids = np.concatenate([np.asarray(s, np.int32) for s in sentences])
    return {
        "ids": ids,
        "sentence_lengths": np.asarray([len(s) for s in sentences], np.int32),
        "word_starts": np.ones(len(ids), np.bool_) if starts is None else starts,
    }


def _synthetic_config():
    from albert_jax.configs.pretrain import common

    d = common.get_data_config()
    d.vocab_size = 500
    d.worker_count = 0
    d.max_seq_length = 32
    d.max_predictions = 5
    return d


@pytest.mark.parametrize("process_count", [2, 3])
def test_process_shards_are_disjoint_and_cover_the_split(process_count):
    rng = np.random.default_rng(0)
    docs = [
        _record([rng.integers(5, 500, int(rng.integers(1, 20))) for _ in range(int(k))])
        for k in rng.integers(1, 6, size=101)
    ]
    d = cfg(_synthetic_config(), debug=True, global_batch_size=process_count, shuffle_window=0)
    seen = []
    for p in range(process_count):
        ds = pipeline.make_dataset(
            d, "train", p, process_count, source=docs, check_tokenizer=False, num_epochs=1
        )
        ids = set()
        for b in ds:
            assert b["input_ids"].shape == (1, 32)  # global batch / process count
            ids.add(int(b["doc_id"][0]))
        seen.append(ids)
    for i in range(process_count):
        for j in range(i + 1, process_count):
            assert not seen[i] & seen[j]
    assert set().union(*seen) == set(range(len(docs)))
    bounds = [pipeline.shard_bounds(3242, p, process_count) for p in range(process_count)]
    assert bounds[0][0] == 0 and bounds[-1][1] == 3242
    assert all(bounds[i][1] == bounds[i + 1][0] for i in range(process_count - 1))


def test_config_errors(pd_config):
    with pytest.raises(pipeline.DataConfigError, match="multiple of process_count=4"):
        pipeline.make_dataset(cfg(pd_config, global_batch_size=30), "train", 0, 4)
    with pytest.raises(pipeline.DataConfigError, match="data.vocab_size=30000"):
        pipeline.make_dataset(cfg(pd_config, vocab_size=30000))
    with pytest.raises(TokenizerError, match="model config says vocab_size=30000"):
        pipeline.make_dataset(pd_config, model_vocab_size=30000)
    with pytest.raises(pipeline.DataConfigError, match="mode must be"):
        pipeline.make_dataset(cfg(pd_config, mode="mlm"))
    with pytest.raises(corpus.CorpusError, match="not built"):
        pipeline.make_dataset(cfg(pd_config, corpus_name="missing"))


def test_sentence_splitting_and_jsonl(tmp_path):
    en = 'Dr. Smith arrived. He said: "It works!" Then he left?  Yes.'
    assert split_sentences(en) == [
        "Dr.",
        "Smith arrived.",
        'He said: "It works!"',
        "Then he left?",
        "Yes.",
    ]
    zh = "今天天气很好。我们去公园吧！“你去吗？”他问。"
    assert split_sentences(zh) == [
        "今天天气很好。",
        "我们去公园吧！",
        "“你去吗？”",
        "他问。",
    ]
    p = tmp_path / "a.jsonl"
    p.write_text(
        json.dumps({"text": "One. Two.\n\nThree."}) + "\n\n" + json.dumps({"text": "四。五"}) + "\n"
    )
    assert list(corpus.read_documents([str(p)], "jsonl")) == [
        ["One.", "Two.", "Three."],
        ["四。", "五"],
    ]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"body": "x"}\n')
    with pytest.raises(corpus.CorpusError, match=r"b.jsonl:1: not a JSON object with a 'text'"):
        list(corpus.read_documents([str(bad)], "jsonl"))
    assert strip_tags("迈向/v  充满/v  希望/n  １/m") == "迈向充满希望１"


def test_bad_input(tmp_path, pd_config, pd_tokenizer, caplog):
    raw = tmp_path / "bad.txt"
    long_sentence = "长" * 3000
    raw.write_bytes(
        "第一句。\n第二句。\n\n".encode()
        + b"\xff\xfe broken\n"  # line 4: invalid UTF-8
        + "单句文档。\n\n\n\n".encode()  # a one-sentence document, then empty space
        + (long_sentence + "\n").encode()
        + "最后。\n".encode()
    )
    stats = corpus.CorpusStats()
    with caplog.at_level(logging.WARNING):
        docs = list(corpus.read_documents([str(raw)], "text", stats=stats))
    assert stats.invalid_utf8_lines == 1
    assert f"{raw}:4: invalid UTF-8" in caplog.text
    assert docs == [["第一句。", "第二句。"], ["单句文档。"], [long_sentence, "最后。"]]
    with pytest.raises(corpus.CorpusError, match=r"bad.txt:4: invalid UTF-8"):
        list(corpus.read_documents([str(raw)], "text", on_invalid_utf8="error"))
    # Empty documents (nothing tokenizable), one-sentence documents, over-long sentences.
    recs = list(
        tokenize_documents(
            iter([*docs, ["   "], []]), pd_tokenizer, max_sentence_tokens=100, stats=stats
        )
    )
    assert len(recs) == 3 and stats.empty_documents == 2
    assert stats.one_sentence_documents == 1 and stats.long_sentences_split == 1
    assert recs[2]["sentence_lengths"].max() <= 100
    with pytest.raises(corpus.CorpusError, match="nope.txt.: no such file"):
        list(corpus.read_documents([str(tmp_path / "nope.txt")], "text"))
    with pytest.raises(corpus.CorpusError, match="input_format must be one of"):
        list(corpus.read_documents([str(raw)], "xml"))

    # The same file through the TFDS builder and the pipeline.
    d = cfg(
        pd_config,
        corpus_name="bad_input",
        input_files=[str(raw)],
        input_format="text",
        data_dir=str(tmp_path / "data"),
        tokenizer_dir=pd_config.tokenizer_dir,
        max_sentence_tokens=100,
        debug=True,
        global_batch_size=4,
    )
    built = corpus.prepare(d)
    assert built.documents == 3 and built.invalid_utf8_lines == 1
    batch = take(d, 3)[0]
    assert batch["input_ids"].shape == (4, 128)
    with pytest.raises(corpus.CorpusError, match="produced no documents"):
        corpus.prepare(cfg(d, corpus_name="empty", input_files=[str(_empty(tmp_path))]))
    with pytest.raises(corpus.CorpusError, match="malformed document record"):
        pipeline._document(_record([[5, 6]]) | {"sentence_lengths": np.array([3], np.int32)})


def _empty(tmp_path):
    p = tmp_path / "empty.txt"
    p.write_text("\n\n   \n")
    return p


def test_render_marks_masks_segments_and_labels(pd_config, pd_tokenizer):
    d = cfg(pd_config, debug=True, global_batch_size=4)
    ex = next(iter_examples(take(d, 1)))
    text = render(ex, pd_tokenizer)
    assert text.count("[CLS]") == 1 and text.count("[SEP]") == 2
    assert text.count("{") == int(ex["num_masked"])
    assert f"label {int(ex['sentence_order_label'])} (" in text


def test_config_is_relative_and_self_contained():
    from albert_jax.configs.pretrain import cpu_small

    c = cpu_small.get_config()
    d = c.data
    assert not d.data_dir.startswith("/") and not d.tokenizer_dir.startswith("/")
    assert d.max_predictions == round(0.15 * d.max_seq_length) and d.mode == "sop"
    assert d.input_files.endswith("199801.txt")  # a string: overridable from the command line
    assert c.model.preset and c.model.vocab_size == d.vocab_size
    assert isinstance(d, ml_collections.ConfigDict)


def test_existing_tfds_text_dataset_through_the_builder(tmp_path, pd_config):
    """An ArrayRecord TFDS text dataset (no builder code needed to read it) as corpus input."""
    import tensorflow_datasets as tfds
    from etils import epath

    texts = ["第一篇文章。它有两句话！", "Second doc. It has two sentences.", "单句。"]

    class TinyTextCorpus(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version("1.0.0")
        pkg_dir_path = epath.Path(str(tmp_path))
        code_path = epath.Path(str(tmp_path / "tiny.py"))

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict({"text": tfds.features.Text()})
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, t in enumerate(texts):
                yield i, {"text": t}

    tfds_dir = tmp_path / "tfds"
    TinyTextCorpus(data_dir=str(tfds_dir), file_format="array_record").download_and_prepare()
    docs = list(
        corpus.read_documents([], "tfds", tfds_name="tiny_text_corpus", tfds_data_dir=str(tfds_dir))
    )
    assert sorted(map(tuple, docs)) == sorted(
        [("第一篇文章。", "它有两句话！"), ("Second doc.", "It has two sentences."), ("单句。",)]
    )
    d = cfg(
        pd_config,
        corpus_name="from_tfds",
        input_format="tfds",
        input_files=[],
        tfds_name="tiny_text_corpus",
        tfds_data_dir=str(tfds_dir),
        data_dir=str(tmp_path / "data"),
        tokenizer_dir=pd_config.tokenizer_dir,
    )
    info = corpus.build(d, train_tokenizer=False)
    assert info["documents"] == 3 and info["stats"]["one_sentence_documents"] == 1
    batch = take(cfg(d, global_batch_size=2), 1)[0]
    assert batch["input_ids"].shape == (2, 128)

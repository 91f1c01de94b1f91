"""More transformers directories read by `load_source` / `albert_jax.convert`: former Flax ALBERT
users' flax_model.msgpack (fixtures written by transformers 4.57.6 itself:
tests/fixtures/make_flax_msgpack.py) and sharded safetensors (model.safetensors.index.json +
shards, made here by splitting our own export); each reads to exactly the parameters of the
single-file PyTorch-layout directory it came from."""

from __future__ import annotations

import json
import os
import shutil

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from support.convert import fixture

from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.source import ConversionError, load_source
from albert_jax.convert import convert


def assert_same_source(got, want):
    assert got.config == want.config
    assert got.head == want.head
    assert got.notes == want.notes
    flat_got = jax.tree_util.tree_flatten_with_path(got.params)[0]
    flat_want = jax.tree_util.tree_flatten_with_path(want.params)[0]
    assert [p for p, _ in flat_got] == [p for p, _ in flat_want]
    for (path, a), (_, b) in zip(flat_got, flat_want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b), jax.tree_util.keystr(path)


@pytest.mark.parametrize(
    "flax_dir, pt_dir",
    [("flax_gelu_new", "hf_gelu_new"), ("flax_masked_lm", "hf_masked_lm")],
    ids=["pretraining", "masked_lm"],
)
def test_flax_msgpack_reads_as_the_pytorch_checkpoint(flax_dir, pt_dir):
    """FlaxAlbertForPreTraining (two groups over four layers) and FlaxAlbertForMaskedLM (no
    pooler, no SOP head), converted from the PyTorch fixtures by transformers: same config, head
    and parameters, bit for bit (a Dense kernel is the Linear weight transposed)."""
    src = load_source(fixture(flax_dir))
    assert src.format == "hf"
    assert_same_source(src, load_source(fixture(pt_dir)))


def test_flax_msgpack_backbone():
    """FlaxAlbertModel saves its tree without the "albert/" level: read as transformers'
    AlbertModel, the backbone of hf_gelu_new exactly."""
    src, full = load_source(fixture("flax_backbone")), load_source(fixture("hf_gelu_new"))
    assert src.config == full.config and src.head is None
    assert sorted(src.params) == ["embeddings", "encoder", "pooler"]
    for path, a in jax.tree_util.tree_flatten_with_path(src.params)[0]:
        b = full.params
        for key in path:
            b = b[key.key]
        assert np.array_equal(a, b), jax.tree_util.keystr(path)


def test_flax_msgpack_converts(tmp_path):
    """`python -m albert_jax.convert` flax_model.msgpack -> ours (unshared) -> transformers: the
    export equals the one made from the PyTorch fixture."""
    for name in ("flax_gelu_new", "hf_gelu_new"):
        convert(fixture(name), str(tmp_path / name / "ours"), unshare=True)
        convert(str(tmp_path / name / "ours"), str(tmp_path / name / "hf"), to="hf")
    config, _ = checkpoint.load(tmp_path / "flax_gelu_new" / "ours")
    assert config.layout == "none"
    got = load_file(str(tmp_path / "flax_gelu_new" / "hf" / "model.safetensors"))
    want = load_file(str(tmp_path / "hf_gelu_new" / "hf" / "model.safetensors"))
    assert sorted(got) == sorted(want)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def shard(directory, parts=2):
    """Splits DIRECTORY/model.safetensors into PARTS shard files + model.safetensors.index.json,
    as transformers' save_pretrained(max_shard_size=...) lays them out; returns the index path."""
    tensors = load_file(os.path.join(directory, "model.safetensors"))
    os.remove(os.path.join(directory, "model.safetensors"))
    names = sorted(tensors)
    weight_map = {}
    for i in range(parts):
        file = f"model-{i + 1:05d}-of-{parts:05d}.safetensors"
        chunk = names[i::parts]
        save_file({k: tensors[k] for k in chunk}, os.path.join(directory, file), {"format": "pt"})
        weight_map.update(dict.fromkeys(chunk, file))
    total = sum(a.nbytes for a in tensors.values())
    index = os.path.join(directory, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return index


@pytest.mark.parametrize("extra", [{}, {"unshare": True}], ids=["grouped", "unshared"])
def test_sharded_safetensors_reads_as_the_single_file(tmp_path, extra):
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    convert(fixture("hf_gelu_new"), str(single), to="hf", **extra)
    shutil.copytree(single, sharded)
    shard(sharded)
    assert "model.safetensors" not in os.listdir(sharded)
    assert_same_source(load_source(str(sharded)), load_source(str(single)))
    out = tmp_path / "ours"
    convert(str(sharded), str(out))  # the command reads it too
    assert checkpoint.load(out)[0].layout == ("none" if extra else "groups:2")


def test_sharded_safetensors_bad_input(tmp_path):
    """A missing shard names the shard file and the index; a shard without a tensor the index
    maps to it names both; an index without a weight_map says so."""
    src = tmp_path / "hf"
    convert(fixture("hf_gelu_new"), str(src), to="hf")
    index = shard(src)
    second = src / "model-00002-of-00002.safetensors"
    second.rename(tmp_path / "moved.safetensors")
    with pytest.raises(ConversionError) as e:
        load_source(str(src))
    assert f"{second}: shard missing (named in {index}" in str(e.value)

    first = load_file(str(src / "model-00001-of-00002.safetensors"))
    (tmp_path / "moved.safetensors").rename(second)
    dropped = sorted(first)[0]
    del first[dropped]
    save_file(first, str(src / "model-00001-of-00002.safetensors"))
    with pytest.raises(ConversionError, match=f"has no tensor {dropped}, which {index} maps"):
        load_source(str(src))

    with open(index, "w") as f:
        json.dump({"metadata": {}}, f)
    with pytest.raises(ConversionError, match="not a safetensors index with a weight_map"):
        load_source(str(src))


def test_flax_msgpack_bad_input(tmp_path):
    src = tmp_path / "flax"
    shutil.copytree(fixture("flax_gelu_new"), src)
    data = (src / "flax_model.msgpack").read_bytes()
    (src / "flax_model.msgpack").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConversionError, match="flax_model.msgpack .truncated or corrupted"):
        load_source(str(src))
    os.remove(src / "flax_model.msgpack")
    with pytest.raises(ConversionError, match="has config.json but no weights"):
        load_source(str(src))

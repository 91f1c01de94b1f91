"""Converters against the reference fixtures (tests/fixtures/make_reference.py): HF and Google
TF1 imports reproduce transformers' outputs, the HF export reproduces transformers' files, and bad
inputs fail with errors that name the problem and leave nothing written."""

from __future__ import annotations

import json
import os
import shutil

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from support.convert import FIXTURES, OUTPUTS, fixture, max_diffs, reference, tree

from albert_jax import AlbertForPreTraining
from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.common import layout_from_layer_groups
from albert_jax.checkpoints.hf import hf_layer_groups, hf_tensors
from albert_jax.checkpoints.source import ConversionError, load_source
from albert_jax.checkpoints.tf_checkpoint import TFCheckpoint, crc32c
from albert_jax.convert import convert
from albert_jax.convert import main as cli

# fixture directory -> reference outputs (tf_relu has no projection, so its own reference)
SOURCES = {
    "hf_gelu_new": "gelu_new",
    "hf_relu": "relu",
    "hf_gelu_erf_unshared": "gelu_erf_unshared",
    "tf_gelu_new": "gelu_new",
    "tf_relu": "relu_tf",
    "tf_sparse_groups": "sparse_groups",
}


def run_model(config, params, ref):
    model = AlbertForPreTraining(config)

    @jax.jit
    def apply(params, ids, types, mask, positions):
        return model.apply(
            {"params": params}, ids, types, mask, masked_positions=positions,
            deterministic=True, output_hidden_states=True,
        )  # fmt: skip

    args = [ref[k].astype(np.int32) for k in ("input_ids", "token_type_ids", "attention_mask")]
    out = apply(params, *args, ref["masked_positions"].astype(np.int32))
    got = {k: np.asarray(getattr(out, k)) for k in OUTPUTS[:4]}
    got["hidden_states"] = np.stack([np.asarray(h) for h in out.hidden_states])
    return got


# --- imports reproduce the reference --------------------------------------------------------------
@pytest.mark.parametrize("src", sorted(SOURCES))
def test_import_reproduces_reference(src):
    source = load_source(fixture(src))
    ref = reference(SOURCES[src])
    assert source.format == src.split("_")[0]
    diffs = max_diffs(run_model(source.config, source.params, ref), ref)
    assert max(diffs.values()) <= 1e-5, diffs


def test_float16_weights_import_as_float32(tmp_path):
    """A transformers checkpoint saved in float16: its weights are cast to float32 on import
    (only training *in* float16 is refused, `trainer.check_dtype`), equal to the float16
    values; the model config it gives carries no dtype (how a run computes is its own
    execution section, float32 by default)."""
    from albert_jax.model.config import EXECUTION_KEYS

    src = tmp_path / "hf16"
    shutil.copytree(fixture("hf_gelu_new"), src)
    weights = load_file(str(src / "model.safetensors"))
    half = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in weights.items()}
    save_file(half, str(src / "model.safetensors"))
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "torch_dtype": "float16"}))
    source, want = load_source(str(src)), load_source(fixture("hf_gelu_new"))
    assert not set(source.config.to_dict()) & EXECUTION_KEYS
    assert source.config == want.config
    for got, full in zip(jax.tree.leaves(source.params), jax.tree.leaves(want.params), strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, full.astype(np.float16).astype(np.float32))


def test_import_config_mapping():
    hf = load_source(fixture("hf_gelu_new")).config
    assert (hf.attention_groups, hf.ffn_groups, hf.hidden_act) == (2, 2, "gelu_new")
    # transformers' "gelu" is the exact erf form; its not-shared layout stays not shared.
    erf = load_source(fixture("hf_gelu_erf_unshared")).config
    assert (erf.hidden_act, erf.layout) == ("gelu", "none")
    # E == H: transformers always has the projection, GA never does.
    assert load_source(fixture("hf_relu")).config.has_projection
    assert not load_source(fixture("tf_relu")).config.has_projection
    # Google's "gelu" is the tanh form.
    assert load_source(fixture("tf_gelu_new")).config.hidden_act == "gelu_new"
    # GA with 4 groups over 2 layers uses groups 0 and 2: two groups, one per layer.
    sparse = load_source(fixture("tf_sparse_groups"))
    assert sparse.config.layout == "none" and sparse.config.attention_groups == 2


def test_wrong_activation_would_be_caught():
    """The fixtures discriminate: gelu instead of gelu_new moves the outputs well beyond 1e-5."""
    source = load_source(fixture("hf_gelu_new"))
    ref = reference("gelu_new")
    diffs = max_diffs(run_model(source.config.replace(hidden_act="gelu"), source.params, ref), ref)
    assert max(diffs.values()) > 1e-4  # 10x the tolerance


def test_layout_from_layer_groups():
    assert layout_from_layer_groups([0, 0, 1, 1]) == (2, [0, 1], None)
    assert layout_from_layer_groups([0, 2]) == (2, [0, 2], None)  # unused groups 1, 3 dropped
    # transformers' float formula at L=18, G=14 is not (i*G)//L for any G: one copy per layer.
    src = hf_layer_groups(18, 14)
    groups, copies, note = layout_from_layer_groups(src)
    assert groups == 18 and copies == src and "not-shared" in note
    # GA's formula at L=G=22 maps layer 15 to group 14 (used twice): exact via per-layer copies.
    ga = [int(i / 22 * 22) for i in range(22)]
    assert ga[15] == 14 and layout_from_layer_groups(ga)[1] == ga


# --- export ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "src,hf", [("hf_gelu_new",) * 2, ("hf_relu",) * 2, ("hf_gelu_erf_unshared",) * 2,
               ("tf_gelu_new", "hf_gelu_new")]
)  # fmt: skip
def test_export_equals_transformers_files(src, hf):
    source = load_source(fixture(src))
    hf_config, tensors, _ = hf_tensors(source.config, source.params)
    want = load_file(os.path.join(fixture(hf), "model.safetensors"))
    assert sorted(tensors) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(tensors[k], want[k], err_msg=k)
    with open(os.path.join(fixture(hf), "config.json")) as f:
        ref_config = json.load(f)
    for key in ("num_hidden_groups", "hidden_act", "embedding_size", "num_hidden_layers"):
        assert hf_config[key] == ref_config[key], key


def test_export_refuses_mixed_layout():
    source = load_source(fixture("hf_gelu_new"))
    from albert_jax.model import sharing

    params, config = sharing.regroup(source.params, source.config, ffn_groups=4)
    with pytest.raises(ConversionError, match="num_hidden_groups"):
        hf_tensors(config, params)


def test_export_without_projection_writes_identity():
    source = load_source(fixture("tf_relu"))
    _, tensors, notes = hf_tensors(source.config, source.params)
    np.testing.assert_array_equal(
        tensors["albert.encoder.embedding_hidden_mapping_in.weight"], np.eye(32, dtype=np.float32)
    )
    assert "identity" in notes[0]


# --- CLI and unsharing ----------------------------------------------------------------------------
def test_cli_unshare_keeps_outputs(tmp_path, capsys):
    out = tmp_path / "unshared"
    assert cli([fixture("hf_gelu_new"), str(out), "--unshare"]) == 0
    printed = capsys.readouterr().out
    assert "read hf checkpoint" in printed and "layout=groups:2" in printed
    assert "unshared: layout groups:2 -> none" in printed and "wrote albert_jax" in printed
    config, params = checkpoint.load(out)
    assert config.layout == "none"
    with open(out / "config.json") as f:
        written = json.load(f)
    assert written["attention_groups"] == written["ffn_groups"] == config.num_layers == 4
    assert params["encoder"]["attention"]["query"]["kernel"].shape == (4, 32, 32)
    ref = reference("gelu_new")
    assert max(max_diffs(run_model(config, params, ref), ref).values()) <= 1e-5
    tok = checkpoint.model_tokenizer(out)
    assert tok is not None and tok.vocab_size == config.vocab_size


def test_cli_round_trip_ours_to_hf(tmp_path):
    ours, hf = tmp_path / "ours", tmp_path / "hf"
    convert(fixture("tf_gelu_new"), str(ours))
    assert cli([str(ours), str(hf), "--to", "hf"]) == 0
    want = load_file(os.path.join(fixture("hf_gelu_new"), "model.safetensors"))
    got = load_file(str(hf / "model.safetensors"))
    assert sorted(got) == sorted(want)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert sorted(os.listdir(hf)) == [
        ".albert_jax_convert.json", "config.json", "model.safetensors", "provenance.json",
        "spiece.model", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip


# --- bad inputs: clear errors, nothing written ----------------------------------------------------
def copy_fixture(name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(fixture(name), dst)
    return dst


def rewrite_safetensors(path, edit):
    tensors = load_file(str(path / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})


def expect_failure(src, out, match, **kwargs):
    with pytest.raises(ConversionError, match=match) as info:
        convert(str(src), str(out), **kwargs)
    assert not os.path.exists(out)
    assert not [p for p in os.listdir(os.path.dirname(out)) if p.startswith(".")]  # no temp dirs
    return str(info.value)


def test_missing_unexpected_and_misshaped_tensors_are_named(tmp_path):
    src = copy_fixture("hf_gelu_new", tmp_path)
    q = "albert.encoder.albert_layer_groups.1.albert_layers.0.attention.query.weight"

    def edit(t):
        del t["albert.pooler.bias"]
        t["albert.extra.weight"] = np.zeros(3, np.float32)
        t[q] = t[q][:, :16]

    rewrite_safetensors(src, edit)
    msg = expect_failure(src, tmp_path / "out", "cannot convert exactly")
    assert "missing tensors" in msg and "albert.pooler.bias (for pooler/bias)" in msg
    assert "unexpected tensors" in msg and "albert.extra.weight" in msg
    assert f"{q}: shape (32, 16), expected (32, 32)" in msg


def test_config_weights_disagreement(tmp_path):
    src = copy_fixture("hf_gelu_new", tmp_path)
    with open(src / "config.json") as f:
        cfg = json.load(f)
    cfg["intermediate_size"] = 60
    with open(src / "config.json", "w") as f:
        json.dump(cfg, f)
    msg = expect_failure(src, tmp_path / "out", "config and weights do not match")
    assert "ffn.weight: shape (64, 32), expected (60, 32)" in msg


def test_missing_tensor_never_initialized(tmp_path):
    src = copy_fixture("hf_gelu_new", tmp_path)
    rewrite_safetensors(src, lambda t: t.pop("sop_classifier.classifier.weight"))
    expect_failure(src, tmp_path / "out", "sop_classifier.classifier.weight")


def test_truncated_safetensors(tmp_path):
    src = copy_fixture("hf_gelu_new", tmp_path)
    path = src / "model.safetensors"
    path.write_bytes(path.read_bytes()[:5000])
    expect_failure(src, tmp_path / "out", "truncated or corrupted")


@pytest.mark.parametrize(
    "damage,match",
    [
        ("flip_data", "corrupted: checksum mismatch in tensor"),
        ("truncate_data", "truncated"),
        ("truncate_index", "corrupted TF checkpoint index"),
        ("flip_index", "corrupted TF checkpoint index"),
    ],
)
def test_damaged_tf_checkpoint(tmp_path, damage, match):
    src = copy_fixture("tf_gelu_new", tmp_path)
    kind, part = damage.split("_")
    path = src / ("model.ckpt-7.index" if part == "index" else "model.ckpt-7.data-00000-of-00001")
    data = bytearray(path.read_bytes())
    if damage == "flip_data":  # inside a tensor the import reads (slots are never read)
        data[
            TFCheckpoint(str(src / "model.ckpt-7")).entries["bert/pooler/dense/kernel"].offset
        ] ^= 1
    elif kind == "flip":
        data[len(data) // 3] ^= 0x55
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    expect_failure(src, tmp_path / "out", match)


def test_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    data = np.random.default_rng(0).integers(0, 256, 3 * 4096 + 17, dtype=np.uint8)
    slow = 0xFFFFFFFF
    for b in data.tobytes():  # bitwise reference implementation
        slow ^= b
        for _ in range(8):
            slow = (slow >> 1) ^ 0x82F63B78 if slow & 1 else slow >> 1
    assert crc32c(data) == slow ^ 0xFFFFFFFF


def test_unknown_format(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "weights.npz").write_bytes(b"nope")
    expect_failure(tmp_path / "junk", tmp_path / "out", "unknown format")
    expect_failure(tmp_path / "nothing", tmp_path / "out", "no such file")


def test_brightmart_layout_is_refused(tmp_path):
    msg = expect_failure(fixture("tf_brightmart"), tmp_path / "out", "brightmart")
    assert "_google" in msg


@pytest.mark.parametrize("src,config_file", [("hf_gelu_new", "config.json"),
                                             ("tf_gelu_new", "albert_config.json")])  # fmt: skip
def test_inner_groups_and_activation_refused(tmp_path, src, config_file):
    src = copy_fixture(src, tmp_path)
    with open(src / config_file) as f:
        cfg = json.load(f)
    with open(src / config_file, "w") as f:
        json.dump({**cfg, "inner_group_num": 2}, f)
    expect_failure(src, tmp_path / "out", "inner_group_num=2")
    with open(src / config_file, "w") as f:
        json.dump({**cfg, "hidden_act": "swish"}, f)
    expect_failure(src, tmp_path / "out", "hidden_act='swish' is not supported")


def test_torch_bin_needs_torch(tmp_path, monkeypatch):
    import builtins

    src = copy_fixture("hf_gelu_erf_unshared", tmp_path)
    os.remove(src / "model.safetensors")
    (src / "pytorch_model.bin").write_bytes(b"not really")
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("no torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    expect_failure(src, tmp_path / "out", r"needs torch: `pip install 'albert-jax\[torch\]'`")


def test_failed_conversion_keeps_previous_output(tmp_path):
    out = tmp_path / "out"
    convert(fixture("tf_sparse_groups"), str(out))
    before = checkpoint.load(out)
    src = copy_fixture("hf_gelu_new", tmp_path)
    rewrite_safetensors(src, lambda t: t.pop("albert.pooler.bias"))
    with pytest.raises(ConversionError):
        convert(str(src), str(out))
    after = checkpoint.load(out)
    assert after[0] == before[0]
    jax.tree_util.tree_map(np.testing.assert_array_equal, after[1], before[1])


# --- classification heads: ours <-> transformers --------------------------------------------------
HEADS = {
    "sequence": {"type": "sequence_classification", "num_labels": 3, "classifier_dropout": 0.2,
                 "labels": ["neg", "neu", "pos"], "task": {"name": "sst3"}},
    "token": {"type": "token_classification", "num_labels": 5},
    "regression": {"type": "sequence_classification", "num_labels": 1,
                   "task_type": "regression", "labels": [0]},
    "qa": {"type": "question_answering", "num_labels": 2, "classifier_dropout": 0.0,
           "doc_stride": 128},
    "choice": {"type": "multiple_choice", "num_labels": 1, "num_choices": 4},
}  # fmt: skip
HF_CLASSES = {
    "sequence_classification": "AlbertForSequenceClassification",
    "token_classification": "AlbertForTokenClassification",
    "question_answering": "AlbertForQuestionAnswering",
    "multiple_choice": "AlbertForMultipleChoice",
}
HF_HEAD = {"question_answering": "qa_outputs"}  # the head's Linear, where not `classifier`


def fine_tuned(tmp_path, head, name="ft"):
    """Our checkpoint of the hf_gelu_new backbone (groups:2) with a random classifier."""
    source = load_source(fixture("hf_gelu_new"))
    rng = np.random.default_rng(7)
    H, N = source.config.hidden_size, head["num_labels"]
    params = {k: v for k, v in source.params.items() if k not in ("mlm", "sop")}
    params["classifier"] = {
        "kernel": rng.standard_normal((H, N)).astype(np.float32),
        "bias": rng.standard_normal(N).astype(np.float32),
    }
    path = tmp_path / name
    checkpoint.save(path, source.config, params, tokenizer=source.tokenizer, head=head)
    return path, source.config, params


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_head_round_trip_through_transformers_files(tmp_path, kind):
    head = HEADS[kind]
    ours, config, params = fine_tuned(tmp_path, head)
    hf, back = tmp_path / "hf", tmp_path / "back"
    assert cli([str(ours), str(hf), "--to", "hf"]) == 0
    # The names and shapes transformers' classification model loads: the backbone under
    # "albert.", the classifier as a Linear [N, H]; no pretraining heads.
    tensors = load_file(str(hf / "model.safetensors"))
    backbone = load_file(os.path.join(fixture("hf_gelu_new"), "model.safetensors"))
    backbone = {k for k in backbone if k.startswith("albert.")}  # the pooler included, see hf.py
    linear = HF_HEAD.get(head["type"], "classifier")
    assert sorted(tensors) == sorted(backbone | {f"{linear}.weight", f"{linear}.bias"})
    np.testing.assert_array_equal(tensors[f"{linear}.weight"], params["classifier"]["kernel"].T)
    np.testing.assert_array_equal(tensors[f"{linear}.bias"], params["classifier"]["bias"])
    with open(hf / "config.json") as f:
        hf_config = json.load(f)
    N = head["num_labels"]
    names = [str(x) for x in head.get("labels", [f"LABEL_{i}" for i in range(N)])]
    assert hf_config["architectures"] == [HF_CLASSES[head["type"]]]
    assert hf_config["num_labels"] == N
    assert hf_config["id2label"] == {str(i): n for i, n in enumerate(names)}
    assert hf_config["label2id"] == {n: i for i, n in enumerate(names)}
    assert hf_config["classifier_dropout_prob"] == head.get("classifier_dropout", 0.1)
    assert hf_config.get("problem_type") == ("regression" if kind == "regression" else None)
    # ... and back: the same head dict (labels of any JSON type included), bit-equal params.
    assert cli([str(hf), str(back)]) == 0
    assert checkpoint.load_head(back) == head
    config2, params2 = checkpoint.load(back)
    assert config2 == config.replace(embedding_projection_always=True)  # E != H: same model
    jax.tree_util.tree_map(np.testing.assert_array_equal, params2, params)
    # --unshare of a fine-tuned checkpoint keeps its head and classifier.
    assert cli([str(ours), str(tmp_path / "unshared"), "--unshare"]) == 0
    assert checkpoint.load_head(tmp_path / "unshared") == head
    np.testing.assert_array_equal(
        checkpoint.load(tmp_path / "unshared")[1]["classifier"]["kernel"],
        params["classifier"]["kernel"],
    )


@pytest.mark.parametrize("kind", ["token", "qa"])
def test_transformers_token_classifier_without_pooler(tmp_path, kind):
    """transformers' AlbertForTokenClassification / AlbertForQuestionAnswering save no pooler:
    imported with a zero pooler (and a note); the token logits, which never use it, are
    unchanged."""
    from albert_jax.model.heads import build_model

    head = HEADS[kind]
    ours, config, params = fine_tuned(tmp_path, head)
    hf = tmp_path / "hf"
    convert(str(ours), str(hf), to="hf")
    rewrite_safetensors(hf, lambda t: [t.pop(k) for k in ("albert.pooler.weight",
                                                          "albert.pooler.bias")])  # fmt: skip
    source = load_source(str(hf))
    assert source.head == head and any("no pooler" in n for n in source.notes)
    assert not source.params["pooler"]["kernel"].any()
    ref = reference("gelu_new")
    ids = ref["input_ids"].astype(np.int32)
    model = build_model(config, head)
    want = model.apply({"params": params}, ids).logits
    got = build_model(source.config, source.head).apply({"params": source.params}, ids).logits
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_hf_head_config_mapping(tmp_path):
    """Directories written by transformers itself (no albert_jax_head key)."""
    src = copy_fixture("hf_gelu_new", tmp_path)
    rewrite_safetensors(src, lambda t: (
        [t.pop(k) for k in list(t) if k.startswith(("predictions.", "sop_classifier."))],
        t.update({"classifier.weight": np.ones((2, 32), np.float32),
                  "classifier.bias": np.zeros(2, np.float32)}),
    ))  # fmt: skip
    with open(src / "config.json") as f:
        cfg = json.load(f)
    plain = {
        **cfg,
        "architectures": ["AlbertForSequenceClassification"],
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "classifier_dropout_prob": 0.1,
    }
    named = {**plain, "id2label": {"1": "yes", "0": "no"}, "classifier_dropout_prob": 0.3}
    for hf_cfg, head in [
        (plain, {"type": "sequence_classification", "num_labels": 2}),
        (named, {"type": "sequence_classification", "num_labels": 2, "labels": ["no", "yes"],
                 "classifier_dropout": 0.3}),
    ]:  # fmt: skip
        with open(src / "config.json", "w") as f:
            json.dump(hf_cfg, f)
        assert load_source(str(src)).head == head
    with open(src / "config.json", "w") as f:
        json.dump({**cfg, "architectures": ["AlbertForImageClassification"]}, f)
    expect_failure(src, tmp_path / "out", "AlbertForImageClassification is not supported")
    # transformers' QA model: no dropout before qa_outputs, whatever classifier_dropout_prob says.
    rename = {"classifier.weight": "qa_outputs.weight", "classifier.bias": "qa_outputs.bias"}
    rewrite_safetensors(src, lambda t: t.update({new: t.pop(old) for old, new in rename.items()}))
    with open(src / "config.json", "w") as f:
        json.dump({**plain, "architectures": ["AlbertForQuestionAnswering"]}, f)
    assert load_source(str(src)).head == {
        "type": "question_answering", "num_labels": 2, "classifier_dropout": 0.0
    }  # fmt: skip
    # A classification architecture over pretraining weights: named, nothing written.
    src2 = copy_fixture("hf_relu", tmp_path)
    with open(src2 / "config.json") as f:
        cfg2 = json.load(f)
    with open(src2 / "config.json", "w") as f:
        json.dump({**cfg2, "architectures": ["AlbertForTokenClassification"]}, f)
    msg = expect_failure(src2, tmp_path / "out", "cannot convert exactly")
    assert "classifier.weight (for classifier/kernel)" in msg and "predictions.bias" in msg


def refused(args, capsys, match):
    """`python -m albert_jax.convert ARGS` (in this process): exit 2, one `error:` line."""
    assert cli([str(a) for a in args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: OUT ") and match in err[0], err
    return err[0]


def test_out_is_replaced_only_if_convert_wrote_it(tmp_path, capsys):
    src = fixture("hf_gelu_erf_unshared")
    mine, notes = tmp_path / "mine", tmp_path / "notes.txt"
    mine.mkdir()
    (mine / "results.tsv").write_text("my results\n")
    notes.write_text("my notes\n")
    before = tree(tmp_path)
    refused([src, mine], capsys, "holds files convert did not write (results.tsv)")
    refused([src, notes, "--to", "hf"], capsys, f"OUT {notes} is a file, not a directory")
    assert tree(tmp_path) == before  # nothing touched, no temporary directory left
    # Ours (its marker lists every file) or an empty directory: replaced.
    (tmp_path / "empty").mkdir()
    for out in ("empty", "empty", "ours"):
        assert cli([src, str(tmp_path / out)]) == 0
    marker = json.loads((tmp_path / "ours" / ".albert_jax_convert.json").read_text())
    assert marker["files"] == ["checkpoint.json", "config.json", "params", "provenance.json"]
    (tmp_path / "ours" / "mine.txt").write_text("added by hand\n")
    refused([src, tmp_path / "ours", "--to", "hf"], capsys, "did not write (mine.txt)")
    assert (tmp_path / "ours" / "mine.txt").exists() and checkpoint.is_checkpoint(tmp_path / "ours")
    # --overwrite: anything but the source.
    for out in (mine, notes):
        assert cli([src, str(out), "--overwrite"]) == 0
        assert checkpoint.is_checkpoint(out) and not (mine / "results.tsv").exists()


def test_convert_never_replaces_its_source(tmp_path, capsys):
    ours = tmp_path / "w" / "model"
    convert(fixture("hf_gelu_erf_unshared"), str(ours))
    before = tree(tmp_path)
    for out, where in ((ours, "is"), (ours / "sub", "is inside"), (tmp_path / "w", "contains")):
        line = refused([ours, out, "--to", "hf", "--overwrite"], capsys, f"{where} SRC {ours}")
        assert line.endswith("a conversion never replaces its own source; choose another OUT")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("to", ["albert_jax", "hf"])
def test_output_has_the_permissions_the_umask_allows(tmp_path, to):
    old = os.umask(0o027)
    try:
        convert(fixture("hf_gelu_new"), str(tmp_path / "out"), to=to)
    finally:
        os.umask(old)
    modes = {
        os.path.relpath(os.path.join(root, n), tmp_path): os.stat(os.path.join(root, n)).st_mode
        for root, dirs, names in os.walk(tmp_path) for n in dirs + names
    }  # fmt: skip
    want = {p: 0o750 if os.path.isdir(tmp_path / p) else 0o640 for p in modes}
    assert {p: m & 0o777 for p, m in modes.items()} == want and "out" in want


def test_vocab_with_a_token_listed_twice_converts(tmp_path):
    """A transformers directory whose vocab.txt lists tokens twice converts (ours and back to
    transformers' files), and its tokenizer gives BertTokenizer's ids (tokens_dup.json)."""
    src = copy_fixture("hf_relu", tmp_path)
    shutil.copy(fixture("tokenizer_wp_dup/vocab.txt"), src / "vocab.txt")
    assert cli([str(src), str(tmp_path / "ours")]) == 0
    assert cli([str(tmp_path / "ours"), str(tmp_path / "hf"), "--to", "hf"]) == 0
    assert (tmp_path / "hf" / "vocab.txt").read_text() == (src / "vocab.txt").read_text()
    with open(os.path.join(FIXTURES, "reference", "tokens_dup.json"), encoding="utf-8") as f:
        cases = json.load(f)
    for tok in (checkpoint.model_tokenizer(tmp_path / "ours"), load_source(str(src)).tokenizer):
        assert [tok.encode(c["text"]) for c in cases] == [c["ids"] for c in cases]


def test_masked_lm_checkpoint_gives_its_mlm_logits(tmp_path):
    """transformers' AlbertForMaskedLM (no SOP head, no pooler; relu, head size 5) converts, and
    the public AlbertForMaskedLM applies it: its MLM logits are transformers' (hf_masked_lm and
    reference/masked_lm.npz, from make_reference.py --masked-lm). AlbertForPreTraining names it
    instead of failing on a missing /sop/kernel."""
    from albert_jax import AlbertForMaskedLM

    out = tmp_path / "ours"
    assert cli([fixture("hf_masked_lm"), str(out)]) == 0
    config, params = checkpoint.load(out)
    assert "sop" not in params and config.hidden_act == "relu"
    assert config.hidden_size // config.num_heads == 5
    ref = reference("masked_lm")
    args = [ref[k].astype(np.int32) for k in ("input_ids", "token_type_ids", "attention_mask")]
    positions = ref["masked_positions"].astype(np.int32)
    got = AlbertForMaskedLM(config).apply({"params": params}, *args, masked_positions=positions)
    assert got.sop_logits is None
    np.testing.assert_allclose(np.asarray(got.mlm_logits), ref["mlm_logits"], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"no sop/ .* AlbertForMaskedLM\(config\)"):
        AlbertForPreTraining(config).apply({"params": params}, *args)

"""Fine-tuning end to end from a checkpoint: every task type, unsharing, evaluation over whole
splits, best checkpoint, predictions, seeds, and bad input (`python -m finetune` itself:
tests/integration/test_finetune_cli.py)."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import random_params
from support.finetune import N_DEV, TOKENIZER, make_config, read_jsonl, tiny_config, write_jsonl

from albert_jax.checkpoints import checkpoint
from albert_jax.data.finetuning.records import DataError
from albert_jax.jobs import run as runs
from albert_jax.model.config import Execution
from albert_jax.model.heads import build_model
from albert_jax.tasks import finetuning as F
from albert_jax.text.tokenization import load_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "task_type",
    [
        pytest.param("classification", marks=pytest.mark.slow),  # the CLI test covers it too
        pytest.param("regression", marks=pytest.mark.slow),
        "tagging",
    ],
)
def test_every_task_type_trains_evaluates_whole_splits_and_predicts(
    pretrained, files, tmp_path, task_type
):
    config = make_config(pretrained, task_type, files)
    summary = runs.run(config, str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    metric = {"classification": "accuracy", "regression": "pearson", "tagging": "f1"}[task_type]
    assert results["metric"] == metric and results["best_step"] in (3, 6)
    # Every dev example is scored exactly once (13 rows, in order), the metric recomputes from
    # the written predictions, and the test split is predicted with the best parameters.
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    assert len({r["where"] for r in dev}) == N_DEV
    assert len(dev) == N_DEV and len(read_jsonl(tmp_path / "predictions" / "test.jsonl")) == 11
    if task_type == "classification":
        acc = np.mean([r["prediction"] == r["label"] for r in dev])
        assert results["dev"]["accuracy"] == pytest.approx(acc)
        assert all(abs(sum(r["probabilities"]) - 1) < 1e-4 for r in dev)
    elif task_type == "regression":
        from scipy import stats

        r = stats.pearsonr([x["label"] for x in dev], [x["prediction"] for x in dev])[0]
        assert results["dev"]["pearson"] == pytest.approx(r, abs=1e-6)
    else:
        assert all(len(r["predicted"]) == len(r["words"]) for r in dev)
    # The best checkpoint holds backbone + head, and `finetune.predict` reproduces the dev file.
    config_b, params = checkpoint.load(tmp_path / "best")
    head = checkpoint.load_head(tmp_path / "best")
    assert head["task_type"] == task_type and "classifier" in params and "mlm" not in params
    out = tmp_path / "again.jsonl"
    values = runs.predict_file(str(tmp_path / "best"), config.task.dev, str(out))
    again = read_jsonl(out)  # one device here, eight in training: equal up to float rounding
    for a, b in zip(again, dev, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            if k in ("probabilities", "logits") or (
                k == "prediction" and task_type != "classification"
            ):
                np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)
            else:
                assert a[k] == b[k], k
    if task_type == "regression":  # a correlation of near-constant outputs amplifies rounding
        from scipy import stats

        labels = [x["label"] for x in again]
        r = stats.pearsonr(labels, [x["prediction"] for x in again])[0]
        assert values["pearson"] == pytest.approx(r, abs=1e-6)
    else:
        assert values[metric] == pytest.approx(results["dev"][metric], rel=1e-3)
    assert summary["dev"][metric]["mean"] == pytest.approx(results["dev"][metric])


def test_predict_writes_the_logits_whose_softmax_are_the_probabilities(files, tmp_path):
    """Calibration and distillation need the logits: each row has them beside its probabilities."""
    head = {
        "type": "sequence_classification", "num_labels": 2, "classifier_dropout": 0.1,
        "task_type": "classification", "max_seq_length": 16, "labels": ["neg", "pos"],
        "text_a": "text", "text_b": None, "label": "label",
    }  # fmt: skip
    config = tiny_config()
    params = random_params(build_model(config, head), seed=3)
    tok = load_tokenizer(TOKENIZER)
    checkpoint.save(tmp_path / "clf", config, params, tokenizer=tok, head=head)
    out = tmp_path / "p.jsonl"
    runs.predict_file(str(tmp_path / "clf"), f"{files}/cls_dev.jsonl", str(out))
    rows = read_jsonl(out)
    logits = np.array([r["logits"] for r in rows])
    assert logits.shape == (N_DEV, 2)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    np.testing.assert_allclose(probs, [r["probabilities"] for r in rows], atol=2e-6)
    assert [r["prediction"] for r in rows] == [head["labels"][i] for i in logits.argmax(1)]


@pytest.mark.parametrize("unshare", ["all", "attention", "ffn"])
def test_unshared_model_starts_from_exactly_the_shared_outputs(pretrained, files, unshare):
    config = make_config(pretrained, "classification", files)
    shared = F.FinetuneData(config, splits=("dev",))
    config.unshare = unshare
    data = F.FinetuneData(config, splits=("dev",))
    L = shared.model_config.num_layers
    want = {"all": (L, L), "attention": (L, 1), "ffn": (1, L)}[unshare]
    assert (data.model_config.attention_groups, data.model_config.ffn_groups) == want
    head = F.make_task(config, data).head
    feats = shared.features["dev"]
    logits = []
    for d in (shared, data):
        model = build_model(d.model_config, head)
        params = dict(d.source.params)
        params.pop("mlm"), params.pop("sop")
        params["classifier"] = {"kernel": jnp.ones((32, 2)) * 0.1, "bias": jnp.zeros(2)}
        logits.append(model.apply({"params": params}, *(feats[k] for k in F.INPUTS)).logits)
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-6, atol=1e-6)


def test_execution_overrides_reach_the_model(pretrained, files):
    """--config.execution.attention_impl / matmul_grad parse (the command line locks the config)
    and reach the task's model; the model config (the checkpoint's) has no such fields."""
    config = make_config(pretrained, "classification", files)
    config.lock()
    data = F.FinetuneData(config, splits=("dev",))
    assert data.execution == Execution(scan_layers=False)  # fine-tuning's default: unrolled
    config.execution.attention_impl, config.execution.matmul_grad = "fused", "autodiff"
    data = F.FinetuneData(config, splits=("dev",))
    want = Execution(scan_layers=False, attention_impl="fused", matmul_grad="autodiff")
    assert data.execution == want
    assert F.make_task(config, data).model.execution == want
    assert data.model_config == F.FinetuneData(config, splits=("dev",)).model_config


def test_tagging_loss_is_a_masked_mean_over_first_pieces(pretrained, files):
    data = F.FinetuneData(make_config(pretrained, "tagging", files), splits=("train",))
    task = F.make_task(make_config(pretrained, "tagging", files), data)
    feats = {k: jnp.asarray(v[:8]) for k, v in data.features["train"].items()}
    n = len(data.labels)
    classifier = {"kernel": jnp.ones((32, n)) * 0.3, "bias": jnp.arange(float(n))}
    params = jax.tree_util.tree_map(jnp.asarray, {**data.source.params, "classifier": classifier})
    params.pop("mlm"), params.pop("sop")
    loss, _ = task.loss(params, feats, task.normalizers(feats), None)
    logits = np.asarray(task.apply(params, feats, None), np.float64)
    labels = np.asarray(feats["labels"])
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    mask = labels >= 0
    want = -np.take_along_axis(logp, np.maximum(labels, 0)[..., None], -1)[..., 0][mask].mean()
    assert mask.sum() < mask.size / 2  # [CLS], [SEP], padding and later pieces are ignored
    assert float(loss) == pytest.approx(want, rel=1e-5)


@pytest.mark.slow
def test_seeds_give_mean_and_std(pretrained, files, tmp_path):
    config = make_config(pretrained, "classification", files, seeds="0,1", total_steps=3)
    summary = runs.run(config, str(tmp_path))
    assert summary["seeds"] == [0, 1]
    accs = [summary["per_seed"][s]["dev"]["accuracy"] for s in ("0", "1")]
    assert summary["dev"]["accuracy"]["mean"] == pytest.approx(np.mean(accs))
    assert summary["dev"]["accuracy"]["std"] == pytest.approx(np.std(accs, ddof=1))
    assert summary["dev_first_epoch"] is not None
    for s in (0, 1):
        assert os.path.exists(tmp_path / f"seed_{s}" / "best" / "checkpoint.json")
    assert json.load(open(tmp_path / "summary.json"))["seeds"] == [0, 1]


def test_bad_inputs_are_named_and_nothing_is_trained(pretrained, files, tmp_path):
    bad = tmp_path / "dev.jsonl"
    write_jsonl(bad, [{"text": "good room", "label": "pos"}, {"text": "bad", "label": "meh"}])
    config = make_config(pretrained, "classification", files)
    config.task.dev = str(bad)
    with pytest.raises(DataError, match=r"dev.jsonl:2.*meh"):
        runs.run(config, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run" / "checkpoints")

    config = make_config(pretrained, "classification", files, tokenizer=str(tmp_path / "tok"))
    os.makedirs(tmp_path / "tok")
    wp = os.path.join(ROOT, "tests", "fixtures", "tokenizer_wp", "vocab.txt")
    with open(wp) as src, open(tmp_path / "tok" / "vocab.txt", "w") as dst:
        dst.write(src.read())
    with pytest.raises(F.FinetuneError, match=r"entries but the model .* vocab_size=120"):
        F.FinetuneData(config)

    config = make_config(pretrained, "classification", files, **{"task.max_seq_length": 64})
    with pytest.raises(F.FinetuneError, match="max_position_embeddings=32"):
        F.FinetuneData(config)

    config = make_config(pretrained, "classification", files, **{"task.max_seq_length": 6})
    data = F.FinetuneData(config)
    assert data.stats["train"]["truncated"] > 0  # over-long inputs are cut and counted


@pytest.mark.slow
def test_head_with_other_labels_must_start_fresh(pretrained, files, tmp_path):
    config = make_config(pretrained, "classification", files, total_steps=3)
    runs.run(config, str(tmp_path / "first"))
    best = str(tmp_path / "first" / "best")
    three = tmp_path / "three.jsonl"
    write_jsonl(three, [{"text": t, "label": lab} for t, lab in
                        (("good", "pos"), ("bad", "neg"), ("room", "mid"))] * 4)  # fmt: skip
    config = make_config(best, "classification", files, total_steps=3)
    config.task.train = str(three)
    config.task.dev = str(three)
    config.task.test = ""
    with pytest.raises(F.FinetuneError, match="fresh_params"):
        runs.run(config, str(tmp_path / "second"))
    config.fresh_params = "^classifier/"
    runs.run(config, str(tmp_path / "second"))
    assert checkpoint.load_head(tmp_path / "second" / "best")["labels"] == ["mid", "neg", "pos"]


@pytest.mark.slow
def test_layerwise_decay_needs_per_layer_weights(pretrained, files, tmp_path):
    config = make_config(pretrained, "classification", files, total_steps=2)
    config.optim.layerwise_decay = 0.8
    with pytest.raises(ValueError, match="unshare"):
        runs.run(config, str(tmp_path / "shared"))
    config.unshare = "all"
    runs.run(config, str(tmp_path / "unshared"))
    assert os.path.exists(tmp_path / "unshared" / "results.json")

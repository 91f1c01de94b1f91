"""The converters as processes: transformers itself loads our HF exports (make_reference.py
--check-export in the reference venv, slow), `python -m albert_jax.convert` as the README runs it
then the Python API on its output, and the command refusing to touch a user's files
(tests/test_convert.py checks the rest in process)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from support.convert import OUTPUTS, fixture, max_diffs, reference, tree

from albert_jax import AlbertForPreTraining
from albert_jax.checkpoints import checkpoint
from albert_jax.convert import convert

# The reference interpreters, one venv per transformers major version (.ci/run builds both).
REFERENCES = {
    "transformers-4.57.6": "ALBERT_JAX_REF_PYTHON",
    "transformers-5": "ALBERT_JAX_REF5_PYTHON",
}


@pytest.mark.slow
@pytest.mark.parametrize("env_var", list(REFERENCES.values()), ids=list(REFERENCES))
def test_transformers_loads_export(env_var):
    """transformers itself loads our HF exports (every HF and TF fixture, shared and unshared, and
    both fine-tuning heads) and reproduces the reference logits / ours within 1e-5, and loads
    the export's tokenizer.json as its fast tokenizer with our ids: make_reference.py
    --check-export, run by a venv with transformers and torch (.ci/run builds one with 4.57.6
    and one with 5.25.0; the project venv has neither) and converting with this interpreter."""
    ref_python = os.environ.get(env_var)
    if not ref_python:
        msg = f"set {env_var} to a python with transformers and torch (see .ci/run)"
        if os.environ.get("CI"):
            pytest.fail(msg)  # CI must never pass without the only check against transformers
        pytest.skip(msg)
    cmd = [ref_python, fixture("make_reference.py"), "--check-export"]
    result = subprocess.run(
        [*cmd, "--project-python", sys.executable], capture_output=True, text=True, timeout=1800
    )
    print(result.stdout)  # the max abs diffs per export, shown with -rP
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "export check passed" in result.stdout, result.stdout[-4000:]
    major = "transformers 5." if env_var.startswith("ALBERT_JAX_REF5") else "transformers 4."
    assert major in result.stdout, result.stdout[:400]  # each venv holds the version it names


# --- the README's flow, as a user types it ------------------------------------------------------
def run_model_eagerly(config, params, ref):
    """`AlbertForPreTraining(cfg).apply({'params': params}, ...)` straight on the NumPy arrays
    that `checkpoint.load` returns: no jit, so stacked (grouped or unshared) leaves are indexed
    with the scan's traced layer index while still NumPy arrays."""
    args = [ref[k].astype(np.int32) for k in ("input_ids", "token_type_ids", "attention_mask")]
    out = AlbertForPreTraining(config).apply(
        {"params": params}, *args, masked_positions=ref["masked_positions"].astype(np.int32),
        deterministic=True, output_hidden_states=True,
    )  # fmt: skip
    got = {k: np.asarray(getattr(out, k)) for k in OUTPUTS[:4]}
    got["hidden_states"] = np.stack([np.asarray(h) for h in out.hidden_states])
    return got


@pytest.mark.parametrize("extra", [[], ["--unshare"]], ids=["grouped", "unshared"])
def test_readme_flow_convert_load_apply(tmp_path, extra):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "albert_jax.convert", fixture("hf_gelu_new"), str(out), *extra]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config, params = checkpoint.load(out)
    assert config.layout == ("none" if extra else "groups:2")
    assert isinstance(params["encoder"]["attention"]["query"]["kernel"], np.ndarray)
    ref = reference("gelu_new")
    diffs = max_diffs(run_model_eagerly(config, params, ref), ref)
    assert max(diffs.values()) <= 1e-5, diffs


@pytest.mark.slow
def test_convert_refuses_users_files_as_a_process(tmp_path):
    """As a user types it: OUT a directory with a file, a plain file, the workdir holding SRC
    (`convert W/model W --to hf` used to delete the pretraining workdir)."""
    work = tmp_path / "w"
    convert(fixture("hf_gelu_erf_unshared"), str(work / "model"))
    (work / "config.json").write_text('{"model": {"preset": "albert-base"}}\n')
    (work / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.tsv").write_text("text\tlabel\n")
    (tmp_path / "notes.txt").write_text("my notes\n")
    before = tree(tmp_path)
    for out, message in (
        ("mine", "holds files convert did not write (train.tsv)"),
        ("notes.txt", "is a file, not a directory"),
        ("w", f"contains SRC {work}/model"),
    ):
        cmd = [sys.executable, "-m", "albert_jax.convert", str(work / "model"), str(tmp_path / out)]
        done = subprocess.run([*cmd, "--to", "hf"], capture_output=True, text=True, timeout=300)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
        assert lines[0].startswith(f"error: OUT {tmp_path / out} ") and message in lines[0]
    assert tree(tmp_path) == before

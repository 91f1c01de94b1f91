"""The data commands and the pipeline in fresh processes: the pipeline's state saved in one
process and restored in another gives the batches of a straight run, `python -m
pretrain.inspect_data` writes its examples as JSON lines, and `python -m pretrain.tokenizer`
trains a tokenizer (the People's Daily fixtures are tests/conftest.py's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from absl import flags
from support import ROOT
from support.pipeline import cfg, take

from albert_jax.text import tokenization as tk

if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()  # grain workers read absl flags


def _resume_script(tmp_path):
    path = tmp_path / "resume.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import json, sys
            sys.path.insert(0, {ROOT!r})
            import ml_collections, numpy as np
            from absl import flags
            from albert_jax.data.pretraining import pipeline

            def main():
                flags.FLAGS(sys.argv[:1])
                cfg_json, mode, state_file, out, n = sys.argv[1:6]
                d = ml_collections.ConfigDict(json.loads(open(cfg_json).read()))
                it = pipeline.make_iterator(d)
                if mode == "restore":
                    it.set_state(pipeline.state_from_json(open(state_file).read()))
                batches = [next(it) for _ in range(int(n))]
                if mode == "save":
                    open(state_file, "w").write(pipeline.state_to_json(it.get_state()))
                np.savez(out, **{{f"{{i}}_{{k}}": v for i, b in enumerate(batches)
                                  for k, v in b.items()}})
                it.close()

            if __name__ == "__main__":
                main()
            """
        )
    )
    return path


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_resume_in_fresh_process(pd_config, tmp_path, workers):
    d = cfg(
        pd_config, global_batch_size=8, max_seq_length=64, worker_count=workers, shuffle_window=64
    )
    cfg_json = tmp_path / "cfg.json"
    cfg_json.write_text(d.to_json())
    script = _resume_script(tmp_path)
    state = tmp_path / "state.json"
    for mode, out, n in (("save", "first.npz", 3), ("restore", "rest.npz", 3)):
        r = subprocess.run(
            [sys.executable, script, cfg_json, mode, state, tmp_path / out, str(n)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    straight = take(d, 6)
    first, rest = np.load(tmp_path / "first.npz"), np.load(tmp_path / "rest.npz")
    for i, b in enumerate(straight):
        src, j = (first, i) if i < 3 else (rest, i - 3)
        for k, v in b.items():
            np.testing.assert_array_equal(src[f"{j}_{k}"], v, err_msg=f"batch {i} {k}")


def test_inspect_data_cli(pd_config, tmp_path):
    out = tmp_path / "ex.jsonl"
    args = [
        f"--config.data.{k}={v}"
        for k, v in {
            "data_dir": pd_config.data_dir,
            "vocab_size": pd_config.vocab_size,
        }.items()
    ]
    base = [
        sys.executable,
        "-m",
        "pretrain.inspect_data",
        "--config",
        "configs/pretrain/cpu_small.py",
    ]
    r = subprocess.run(
        [*base, *args, "--jsonl", str(out), "--n", "7"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 7
    for row in rows:
        n, k = row["length"], row["num_masked"]
        assert len(row["input_ids"]) == len(row["segment_ids"]) == len(row["word_starts"]) == n
        assert len(row["masked_lm_positions"]) == len(row["masked_lm_ids"]) == k
        assert row["sentence_order_label"] in (0, 1)


def test_tokenizer_cli(tmp_path):
    src = tmp_path / "corpus.txt"
    lines = [f"Sentence number {i} has 1,000 words, Café style." for i in range(300)]
    src.write_text("\n".join(lines[:150]) + "\n\n" + "\n".join(lines[150:]) + "\n")
    out = tmp_path / "tok"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pretrain.tokenizer",
            "--input",
            str(src),
            "--vocab_size",
            "60",
            "--out",
            str(out),
            "--character_coverage",
            "1.0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert {"spiece.model", "spiece.vocab", "tokenizer.json"} <= set(os.listdir(out))
    tok = tk.SentencePieceTokenizer.from_dir(out)
    assert tok.special_ids() == tk.SPECIAL_IDS and tok.vocab_size == 60
    assert tok.lower_case
    pieces = tok.tokenize("Café 1,000")
    assert "," in pieces and tok.decode(tok.encode("Café 1,000")) == "cafe 1,000"

"""Pretraining on a user's own corpus as the tests run it: the CPU config, the fixture
SentencePiece model, a few-step run's flags and `python ARGS` in a fresh one-device process; the
documented `--config.KEY=VALUE` overrides and their check (the `documents` and `texts` fixtures
are in tests/conftest.py)."""

import os
import re
import subprocess
import sys

from support import ROOT

CPU_SMALL = os.path.join(ROOT, "configs", "pretrain", "cpu_small.py")
SP_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "tokenizer_sp", "spiece.model")
# Small runs: a few steps of a tiny batch, no evaluation, no progress bar.
SHORT = [
    "--config.total_steps=2",
    "--config.optim.warmup_steps=1",
    "--config.checkpoint_every=2",
    "--config.eval_every=0",
    "--config.log_every=1",
    "--config.progress_bar=False",
    "--config.data.global_batch_size=4",
]


def run(args, cwd, check=True):
    # One device, as on a laptop; LLVM at -O0 as in the rest of the suite (compile time).
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def placeholder(raw):
    """A documented value that stands for the reader's own: choices (`a|b`), elisions (`...`)
    and names such as MAX or PATH."""
    return "|" in raw or "..." in raw or re.fullmatch(r"[A-Z_]+", raw.rstrip("`.]:")) is not None


def check_overrides(config, overrides):
    """`--config=CONFIG` with these `--config.KEY=VALUE` overrides parses with ml_collections'
    config flags, and each key ends up holding its value (the config docstrings' overrides in
    test_own_corpus.py, the pages' in test_docs.py)."""
    from absl import flags
    from ml_collections import config_flags

    fv, argv = flags.FlagValues(), ["prog", f"--config={config}", *overrides]
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    fv(argv)
    last = {o.split("=", 1)[0]: o for o in overrides}  # a key given twice: the later one wins
    for o in last.values():
        key, value = o[len("--config.") :].split("=", 1)
        got = fv.config
        for part in key.split("."):
            got = got[part]
        if isinstance(got, tuple):
            got = ",".join(map(str, got))
        if isinstance(got, bool):
            want = value.lower() in ("true", "1")
        else:
            want = type(got)(value) if isinstance(got, int | float) else value
        assert got == want, o


def one_sentence_corpus(documents, path):
    """Each document's first sentence alone: text without sentence ends reads this way."""
    path.write_text("".join(d[0] + "\n\n" for d in documents), encoding="utf-8")
    return path

"""What every benchmark shares: one JSON report on stdout (and in `--out` when given), XLA's
cost figures, and the random batches. numpy only, so the peers' environments import it too."""

from __future__ import annotations

import json

import numpy as np

NUM_LABELS = 2  # the classification benchmarks' label count (ours and the peer's)


def emit(result: dict, out: str | None = None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def xla_cost(compiled) -> dict:
    """XLA's own count of the compiled step: FLOPs and bytes accessed, deterministic figures to
    set beside the (noisy, shared-machine) timings."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {
        "xla_gflops": round(cost["flops"] / 1e9, 2),
        "xla_gbytes_accessed": round(cost["bytes accessed"] / 1e9, 3),
    }


def pair_ids(rng: np.random.Generator, vocab: int, batch: int, seq: int):
    """Random token ids (no padding, none below 5: the special tokens) and two equal segments."""
    ids = rng.integers(5, vocab, size=(batch, seq)).astype(np.int32)
    segments = np.zeros((batch, seq), np.int32)
    segments[:, seq // 2 :] = 1
    return ids, segments


def classification_batch(vocab: int, batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    """finetune_step.py's and peer_finetune.py's batch: the same draws on both sides."""
    rng = np.random.default_rng(seed)
    ids, segments = pair_ids(rng, vocab, batch, seq)
    return {
        "input_ids": ids,
        "token_type_ids": segments,
        "attention_mask": np.ones((batch, seq), np.int32),
        "labels": rng.integers(0, NUM_LABELS, size=(batch,)).astype(np.int32),
    }

"""A synthetic pretraining task for the trainer tests, and a worker that runs `train()` on it.

Importable (`from trainer_worker import SyntheticTask, make_config`) and runnable as a script:

    python tests/trainer_worker.py '<json spec>'

The spec holds the workdir and config overrides; XLA_FLAGS / JAX_PLATFORMS come from the
environment (the test sets them). Global batch i is a deterministic function of i, and process p
of P takes rows [p*B/P, (p+1)*B/P), so the global batch is the same for any process count.
"""

from __future__ import annotations

import json
import os
import sys
import time

import grain
import ml_collections
import numpy as np

VOCAB, SEQ, PREDS, BATCH = 97, 16, 4, 8
NUM_BATCHES = 64  # distinct global batches before the stream repeats


def make_global_batch(i: int, batch: int = BATCH) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1000 + int(i))
    ids = rng.integers(5, VOCAB, (batch, SEQ)).astype(np.int32)
    lengths = rng.integers(SEQ // 2, SEQ + 1, batch)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    ids = ids * mask
    segs = np.zeros((batch, SEQ), np.int32)
    for r, n in enumerate(lengths):
        segs[r, n // 2 : n] = 1
    pos = np.stack(
        [np.sort(rng.choice(np.arange(1, SEQ // 2), PREDS, replace=False)) for _ in range(batch)]
    )
    pos = pos.astype(np.int32)
    mlm_ids = np.take_along_axis(ids, pos, axis=1).astype(np.int32)
    weights = np.ones((batch, PREDS), np.float32)
    weights[rng.random((batch, PREDS)) < 0.25] = 0.0  # some padded predictions
    return {
        "input_ids": ids,
        "segment_ids": segs,
        "input_mask": mask,
        "masked_lm_positions": pos,
        "masked_lm_ids": mlm_ids,
        "masked_lm_weights": weights,
        "sentence_order_label": rng.integers(0, 2, batch).astype(np.int32),
    }


def tiny_model_config():
    from albert_jax import AlbertConfig

    return AlbertConfig(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=32,
        num_layers=4,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )


def _dataset(
    process_index, process_count, sleep_from=None, inf_at=None, batch=BATCH, delay_from=None
):
    rows = batch // process_count
    lo = process_index * rows

    def load(i):
        i = int(i)
        if sleep_from is not None and i >= sleep_from:
            time.sleep(3600)  # stall here so the test can SIGKILL us mid-run
        if delay_from is not None and i >= delay_from:
            time.sleep(0.5)  # slow steps, so a SIGTERM arrives mid-run
        b = make_global_batch(i, batch)
        if inf_at is not None and i == inf_at:
            b["masked_lm_weights"] = np.where(b["masked_lm_weights"] > 0, np.inf, 0.0).astype(
                np.float32
            )
        return {k: v[lo : lo + rows] for k, v in b.items()}

    return iter(
        grain.MapDataset.range(NUM_BATCHES)
        .map(load)
        .repeat()
        .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
    )


def make_task(config, sleep_from=None, inf_at=None, delay_from=None, model=None):
    """The synthetic task on `model` (an AlbertConfig; default `tiny_model_config()`)."""
    from albert_jax.tasks.pretraining import ElectraTask, PretrainingTask

    base = ElectraTask if config.get("objective", "mlm+sop") == "electra" else PretrainingTask

    class SyntheticTask(base):
        def train_iterator(self, process_index, process_count):
            return _dataset(process_index, process_count, sleep_from, inf_at, delay_from=delay_from)

        def eval_iterator(self, process_index, process_count):
            return _dataset(process_index, process_count)

    return SyntheticTask(config, config.data, model_config=model or tiny_model_config())


def make_config(**overrides) -> ml_collections.ConfigDict:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from albert_jax.configs.pretrain.common import pretrain_defaults

    c = pretrain_defaults()
    c.data = ml_collections.ConfigDict(
        dict(global_batch_size=BATCH, max_seq_length=SEQ, max_predictions=PREDS)
    )
    c.update(total_steps=6, log_every=1, checkpoint_every=2, keep_checkpoints=10, eval_every=0)
    c.update(progress_bar=False, mesh_shape=(-1, 1, 1))
    c.optim.update(learning_rate=1e-3, warmup_steps=2)
    c.update_from_flattened_dict(overrides)  # dotted paths, as on the command line
    c.mesh_shape = tuple(c.mesh_shape)  # a list when the spec came through JSON
    if "optim.total_steps" not in overrides:
        c.optim.total_steps = int(c.total_steps)
    return c


def main(spec: dict) -> None:
    from albert_jax.train.trainer import train

    config = make_config(**spec.get("config", {}))
    task = make_task(config, spec.get("sleep_from"), spec.get("inf_at"), spec.get("delay_from"))
    last = train(config, spec["workdir"], task.job())
    if "result" in spec:
        with open(spec["result"], "w") as f:
            json.dump(last, f)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

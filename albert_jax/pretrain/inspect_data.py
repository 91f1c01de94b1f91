r"""Prints decoded pretraining examples and summary statistics, or writes them as JSON lines.

  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --n 5
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --jsonl ex.jsonl --n 100
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --jsonl ex.jsonl --epochs 1

With ``--epochs N`` the split is read N times over and then ends; with ``--jsonl`` every example
of those epochs is streamed to the file (one at a time: memory does not grow with the corpus).

In the printout ``[CLS]``/``[SEP]`` split the segments (``A`` then ``B``), a masked token is shown
as ``{shown>original}`` (``{[MASK]>x}``, ``{x>x}`` kept, ``{y>x}`` random), and the label line says
whether the pair is in natural order, swapped, or has a random-document ``B``. The summary
(over ``--stats_n`` examples) gives the figures the statistics test checks; a warning on stderr
follows when the sentence pairs are degenerate (``albert_jax.data.pretraining.pair_check``).
"""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np
from absl import app, flags
from ml_collections import config_flags

from albert_jax import cli, paths
from albert_jax.data.pretraining import masking
from albert_jax.data.pretraining.pair_check import pair_warning
from albert_jax.data.pretraining.pipeline import corpus_tokenizer, make_iterator, resolve_paths
from albert_jax.tasks.pretrain_config import PretrainConfig
from albert_jax.text.tokenization import MASK_ID, pretraining_ids

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (uses config.data).")
_N = flags.DEFINE_integer("n", 5, "Examples to print / write.")
_JSONL = flags.DEFINE_string("jsonl", None, "Write N examples as JSON lines to this file.")
_STATS_N = flags.DEFINE_integer("stats_n", 1000, "Examples for the summary statistics.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Base for relative paths (default: cwd).")
_SPLIT = flags.DEFINE_string("split", "train", "Split.")
_EPOCHS = flags.DEFINE_integer(
    "epochs", None, "Read the split this many times, then stop; with --jsonl write them all."
)


def iter_examples(batches):
    """Unbatches a stream of batches into per-example dicts."""
    for batch in batches:
        n = len(batch["input_ids"])
        for i in range(n):
            yield {k: v[i] for k, v in batch.items()}


def unpadded(ex: dict) -> dict:
    """JSON-ready example: all output fields unpadded, plus word starts and diagnostics."""
    n = int(ex["length"]) if "length" in ex else int(ex["input_mask"].sum())
    k = int(ex["masked_lm_weights"].sum())
    out = {
        "input_ids": ex["input_ids"][:n].tolist(),
        "segment_ids": ex["segment_ids"][:n].tolist(),
        "input_mask": ex["input_mask"][:n].tolist(),
        "masked_lm_positions": ex["masked_lm_positions"][:k].tolist(),
        "masked_lm_ids": ex["masked_lm_ids"][:k].tolist(),
        "masked_lm_weights": ex["masked_lm_weights"][:k].tolist(),
        "sentence_order_label": int(ex["sentence_order_label"]),
        "length": n,
        "num_masked": k,
    }
    if "token_boundary" in ex:
        out["word_starts"] = ex["token_boundary"][:n].astype(int).tolist()
        out["original_ids"] = ex["original_ids"][:n].tolist()
        for key in (
            "budget",
            "len_a",
            "target_length",
            "num_chunk_segments",
            "doc_id",
            "instance_index",
            "epoch",
        ):
            out[key] = int(ex[key])
        for key in ("short_target", "random_doc", "swapped"):
            out[key] = bool(ex[key])
        out["span_counts"] = ex["span_counts"].tolist()
    return out


def summarize(
    examples: list[dict], max_predictions: int, masked_lm_prob: float, mask_id: int = MASK_ID
) -> dict:
    """Statistics of debug-enabled examples (see ``data.debug``)."""
    spans = np.sum([ex["span_counts"] for ex in examples], axis=0)
    total_spans = int(spans.sum())
    shown, orig = [], []
    budget_ok = 0
    for ex in examples:
        k = int(ex["masked_lm_weights"].sum())
        pos = ex["masked_lm_positions"][:k]
        shown.append(ex["input_ids"][pos])
        orig.append(ex["masked_lm_ids"][:k])
        want = masking.num_to_predict(int(ex["length"]), max_predictions, masked_lm_prob)
        budget_ok += int(k == want)
    shown_a, orig_a = np.concatenate(shown), np.concatenate(orig)
    n_masked = len(shown_a)
    is_mask = shown_a == mask_id
    kept = (~is_mask) & (shown_a == orig_a)
    labels = np.array([int(ex["sentence_order_label"]) for ex in examples])
    multi = np.array([int(ex["num_chunk_segments"]) >= 2 for ex in examples])
    rand = np.array([bool(ex["random_doc"]) for ex in examples])
    swapped = np.array([bool(ex["swapped"]) for ex in examples])
    first = [ex for ex in examples if int(ex["instance_index"]) == 0]
    pair = multi & ~rand
    return {
        "examples": len(examples),
        "span_fraction_1_2_3": (spans / max(total_spans, 1)).round(4).tolist(),
        "spans": total_spans,
        "masked_count_equals_budget": budget_ok / len(examples),
        "masked_tokens": n_masked,
        "frac_mask_kept_random": [
            round(float(is_mask.mean()), 4),
            round(float(kept.mean()), 4),
            round(float((~is_mask & ~kept).mean()), 4),
        ],
        "label_rate": round(float(labels.mean()), 4),
        "swap_rate_multi_segment_chunks": round(float(swapped[pair].mean()), 4)
        if pair.any()
        else None,
        "multi_segment_chunks": int(multi.sum()),
        "single_segment_chunks": int((~multi).sum()),
        "single_segment_label_rate": round(float(labels[~multi].mean()), 4)
        if (~multi).any()
        else None,
        "random_doc_rate": round(float(rand.mean()), 4),
        "short_target_fraction_documents": round(
            float(np.mean([bool(ex["short_target"]) for ex in first])), 4
        )
        if first
        else None,
        "short_target_fraction_examples": round(
            float(np.mean([bool(ex["short_target"]) for ex in examples])), 4
        ),
        "mean_length": round(float(np.mean([int(ex["length"]) for ex in examples])), 2),
    }


def render(ex: dict, tok) -> str:
    n = int(ex["length"])
    ids = ex["input_ids"][:n]
    k = int(ex["masked_lm_weights"].sum())
    masked = dict(
        zip(ex["masked_lm_positions"][:k].tolist(), ex["masked_lm_ids"][:k].tolist(), strict=True)
    )
    pieces = tok.convert_ids_to_tokens(ids)
    parts = []
    for i, p in enumerate(pieces):
        if i in masked:
            parts.append("{" + p + ">" + tok.convert_ids_to_tokens([masked[i]])[0] + "}")
        else:
            parts.append(p)
    kind = "random-doc B" if ex["random_doc"] else ("swapped" if ex["swapped"] else "natural")
    return (
        f"doc {int(ex['doc_id'])} #{int(ex['instance_index'])}  len {n}  "
        f"A {int(ex['len_a'])}  masked {k}/{int(ex['budget'])}  "
        f"label {int(ex['sentence_order_label'])} ({kind}), chunk segments "
        f"{int(ex['num_chunk_segments'])}, target {int(ex['target_length'])}"
        f"{' (short)' if ex['short_target'] else ''}\n  " + " ".join(parts)
    )


def main(argv):
    del argv
    if _CONFIG.value is None:
        raise app.UsageError("--config is required")
    d = resolve_paths(_CONFIG.value.data, _WORKDIR.value)
    epochs = _EPOCHS.value
    with d.unlocked():
        d.debug = True
        d.worker_count = 0
        if epochs:
            d.global_batch_size = 1  # no example dropped with a last partial batch
    tok = corpus_tokenizer(d)
    examples = iter_examples(make_iterator(d, _SPLIT.value, num_epochs=epochs))
    if _JSONL.value:
        limit = None if epochs else _N.value
        n = 0
        with paths.open_text(_JSONL.value, "w") as f:
            for ex in examples:
                f.write(json.dumps(unpadded(ex), ensure_ascii=False) + "\n")
                n += 1
                if n == limit:
                    break
        print(json.dumps({"wrote": n, "file": _JSONL.value, "epochs": epochs}))
        return
    held = list(itertools.islice(examples, max(_N.value, _STATS_N.value)))
    for ex in held[: _N.value]:
        print(render(ex, tok))
    stats = summarize(
        held, int(d.max_predictions), float(d.masked_lm_prob), pretraining_ids(tok)["mask"]
    )
    print(json.dumps(stats, indent=1), file=sys.stdout)
    head = PretrainConfig.from_config(_CONFIG.value).sentence_head
    warning = pair_warning(head, d, stats["label_rate"], stats["random_doc_rate"])
    if warning:
        print(warning, file=sys.stderr, flush=True)


def entry():  # the console script
    cli.run(main)


if __name__ == "__main__":
    entry()

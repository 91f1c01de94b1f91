"""Mutation check: 82 hand-written plausible bugs, applied one at a time to a temporary copy of
the repository, each run against the few tests that should catch it. Outside the default suite
(the name does not match test_*.py). The mutants, by module of albert_jax/:

    model/     albert 19, electra 5, losses 4, heads 1, decoding 1
    train/     optim 10, gradients 4, trainer 3, trackers 1, goodput 1
    data/      masking 5, pipeline 5, pairs 3, documents 2, parallel 2, records 1
    elsewhere  tasks/pretraining 3, tasks/finetuning 1, checkpoints/checkpoint 1,
               checkpoints/train_state 1, experiments/sweep 1, text/tokenization 2, paths 2,
               provenance 1, cli 2, scoring/metrics 1

    uv run python tests/mutants.py -j 2              # all mutants, two workers
    uv run python tests/mutants.py --ci -j 2         # CI's subset (CI_MUTANTS, ~5 minutes)
    uv run python tests/mutants.py --list            # what they are (also checks every mutant)
    uv run python tests/mutants.py --only model-pooler-no-tanh,optim-warmup-off-by-one
    uv run python tests/mutants.py --json mutants.json

The tracked (and untracked, not ignored) files are copied once per worker into a temporary
directory; the working tree is never touched. Before the mutants, a canary (the copy's
albert_jax/__init__.py made to raise) must fail, proving the tests import the copy and not this
checkout, and the union of the mutants' tests must pass on the unmutated copy. A test named by its
node id runs even if marked slow; a whole test file runs its default tier. A mutant is *killed*
when its tests fail (pytest exit 1, or 2 for a collection error), *survived* when they pass; a
survivor marked `equivalent` (with the reason it cannot change behaviour) is reported as such.
Exits 1 if any mutant survives unexplained, times out or errs; 2 if a mutant is stale (its file is
gone, its snippet does not occur exactly once, or a test it names is not defined: update the
mutant). tests/test_mutants_fresh.py makes that last check in the default suite.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST_BASE = ("-q", "-p", "no:cacheprovider")
PYTEST = ("-x", *PYTEST_BASE)  # per mutant: the first failure kills it
CANARY = "mutants.py canary: the copy's albert_jax was imported"
_ACTIVE: set[subprocess.Popen] = set()  # running pytest processes (each its own process group)
_ACTIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    file: str  # relative to the repository root
    original: str  # must occur exactly once in the file
    replacement: str
    description: str  # the plausible bug
    tests: tuple[str, ...]  # pytest files or node ids (under tests/) that should kill it
    equivalent: str | None = None  # why it cannot change behaviour, if it survives by design


MODEL = "albert_jax/model/albert.py"
ELECTRA = "albert_jax/model/electra.py"
ELECTRA_TESTS = "tests/test_electra.py"
LOSSES = "albert_jax/model/losses.py"
OPTIM = "albert_jax/train/optim.py"
CLI = "albert_jax/cli.py"
MASKING = "albert_jax/data/pretraining/masking.py"
PAIRS = "albert_jax/data/pretraining/pairs.py"
PIPELINE = "albert_jax/data/pretraining/pipeline.py"
DOCUMENTS = "albert_jax/data/pretraining/documents.py"
PARALLEL = "albert_jax/data/pretraining/parallel.py"
PRETRAINING = "albert_jax/tasks/pretraining.py"
TRAINER = "albert_jax/train/trainer.py"
GRADIENTS = "albert_jax/train/gradients.py"
TRAIN_STATE = "albert_jax/checkpoints/train_state.py"
PATHS = "albert_jax/paths.py"
BUCKET = "tests/test_bucket_paths.py"

NUMPY_REF = "tests/test_model.py::test_matches_numpy_reference[all]"
NUMPY_REF_GROUPS = "tests/test_model.py::test_matches_numpy_reference[groups:2]"
FUSED_NUMPY = (
    "tests/test_accelerator_path.py::test_fused_attention_and_autodiff_match_numpy[all-scan]"
)
WIRING = (
    "tests/test_trainer_wiring.py::"
    "test_each_logged_loss_equals_the_model_on_that_batch_with_those_params"
)
WIRING_DROPOUT = (
    "tests/test_trainer_wiring.py::test_dropout_and_evaluation_on_grouped_and_unshared_layouts"
    "[groups:2]"
)
PD_STATISTICS = "tests/test_data_pipeline.py::test_statistics_on_peoples_daily"
OWN_WORDPIECE = "tests/test_own_corpus.py::test_wordpiece_vocab_examples_use_its_special_ids"
MALLOC = (
    "tests/integration/test_fresh_process.py::"
    "test_entry_points_reuse_freed_host_memory_instead_of_faulting_it_in_again"
)
STEP_KEYS = (
    "tests/test_trainer_wiring.py::test_dropout_key_is_folded_with_the_step_and_the_micro_batch"
)

MUTANTS = [
    # ------------------------------------------------------------------ model
    Mutant(
        "model-matmul-cotangent-not-rounded",
        MODEL,
        "xc, w, g = x.astype(dtype), kernel.astype(dtype), g.astype(dtype)",
        "xc, w = x.astype(dtype), kernel.astype(dtype)",
        "the hand-written matmul gradient multiplies the float32 cotangent (not the bf16 one)",
        (
            "tests/test_model.py::test_matmul_and_its_gradient_are_the_products_of_the_dtype_operands",
        ),
    ),
    Mutant(
        "model-matmul-kernel-gradient-in-compute-dtype",
        MODEL,
        "return dx.astype(x.dtype), dw.astype(kernel.dtype)",
        "return dx.astype(x.dtype), dw.astype(dtype).astype(kernel.dtype)",
        "the kernel's gradient is rounded to bf16 before it reaches the float32 weights",
        (
            "tests/test_model.py::test_matmul_and_its_gradient_are_the_products_of_the_dtype_operands",
        ),
    ),
    Mutant(
        "model-save-dots-by-primitive",
        MODEL,
        'jax.checkpoint_policies.save_only_these_names("dot")',
        "jax.checkpoint_policies.checkpoint_dots",
        "remat save_dots looks for dot primitives, which the hand-written gradient hides",
        ("tests/test_model.py::test_save_dots_keeps_every_matmul_output_and_only_those",),
    ),
    Mutant(
        "model-attention-logits-unnamed",
        MODEL,
        'logits = checkpoint_name(logits, "dot") + bias',
        "logits = logits + bias",
        "the attention logits are recomputed under save_dots",
        ("tests/test_model.py::test_save_dots_keeps_every_matmul_output_and_only_those",),
    ),
    Mutant(
        "model-dropout-no-rescale",
        MODEL,
        "jnp.where(keep, x / (1.0 - rate), 0)",
        "jnp.where(keep, x, 0)",
        "dropout keeps 1-p of the units but does not rescale them by 1/(1-p)",
        ("tests/test_dropout.py::test_helper_keeps_1_minus_p_and_preserves_the_mean",),
    ),
    Mutant(
        "model-dropout-same-mask-every-layer",
        MODEL,
        "rng = _fold(rng, i)  # dropout keys",
        "rng = rng  # dropout keys",
        "the layer index is not folded into the dropout key: every layer draws the same masks",
        ("tests/test_dropout.py::test_masks_differ_across_layers_steps_and_examples",),
    ),
    Mutant(
        "model-attention-no-scale",
        MODEL,
        "ctx = jax.nn.dot_product_attention(q, k, v, bias=bias.astype(q.dtype))",
        "ctx = jax.nn.dot_product_attention(q, k, v, bias=bias.astype(q.dtype), scale=1.0)",
        "attention logits not scaled by 1/sqrt(head_dim) (the fused path, auto off CPU)",
        (FUSED_NUMPY,),
    ),
    Mutant(
        "model-fused-attention-keys-as-queries",
        MODEL,
        "ctx = jax.nn.dot_product_attention(q, k, v, bias=bias.astype(q.dtype))",
        "ctx = jax.nn.dot_product_attention(k, q, v, bias=bias.astype(q.dtype))",
        "the fused kernel is called with queries and keys swapped",
        (FUSED_NUMPY,),
    ),
    Mutant(
        "model-attention-auto-fused-on-cpu",
        MODEL,
        'return "fused" if rate == 0.0 and backend != "cpu" else "explicit"',
        'return "fused" if rate == 0.0 else "explicit"',
        "attention_impl=auto takes the fused kernel on CPU too (where the einsum form is faster)",
        ("tests/test_accelerator_path.py::test_auto_resolves_to_explicit_and_custom_on_cpu_only",),
    ),
    Mutant(
        "model-matmul-autodiff-takes-the-custom-gradient",
        MODEL,
        'product = _matmul if grad == "custom" else _product',
        "product = _matmul",
        "matmul_grad=autodiff still goes through the custom_vjp: jax.jvp fails",
        ("tests/test_accelerator_path.py::test_forward_mode_autodiff_needs_matmul_grad_autodiff",),
    ),
    Mutant(
        "model-explicit-attention-no-scale",
        MODEL,
        "q = q * jnp.asarray(q.shape[-1] ** -0.5, q.dtype)",
        "q = q",
        "attention logits not scaled by 1/sqrt(head_dim) (the CPU path)",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-mask-value",
        MODEL,
        "MASK_VALUE = -10000.0",
        "MASK_VALUE = -1e9",
        "additive padding bias -1e9 instead of the reference's -10000 (all-padding rows change)",
        ("tests/test_model.py::test_all_padding_row_is_a_constant_shift",),
    ),
    Mutant(
        "model-mask-on-queries",
        MODEL,
        "attention_mask = attention_mask[:, None, :]",
        "attention_mask = attention_mask[:, :, None]",
        "padding bias broadcast over the query axis instead of the key axis",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-layernorm-eps-ignored",
        MODEL,
        "y = normalize(x, c.layer_norm_eps) * scale + bias",
        "y = normalize(x, 1e-6) * scale + bias",
        "LayerNorm ignores config.layer_norm_eps (1e-12) and uses a library default 1e-6",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-no-token-type",
        MODEL,
        "            + jnp.take(self.token_type_embeddings, token_type_ids, axis=0)\n",
        "",
        "token-type (segment) embeddings are not added",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-pooler-no-tanh",
        MODEL,
        "pooled = jnp.tanh(self.pooler(seq[:, 0]).astype(jnp.float32)).astype(seq.dtype)",
        "pooled = self.pooler(seq[:, 0])",
        "pooler without its tanh",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-mlm-exact-gelu",
        MODEL,
        "x = ACTIVATIONS[c.hidden_act](",
        'x = ACTIVATIONS["gelu"](',
        "MLM head uses the exact (erf) GELU where the config says gelu_new (tanh)",
        (NUMPY_REF,),
    ),
    Mutant(
        "model-groups-interleaved",
        MODEL,
        "group = (i * c.attention_groups) // c.num_layers",
        "group = i % c.attention_groups",
        "layer i uses attention group i % G (interleaved) instead of (i * G) // L (contiguous)",
        (NUMPY_REF_GROUPS,),
    ),
    # ------------------------------------------------------------------ seq2seq decoding
    Mutant(
        "heads-prefix-lm-strict",
        "albert_jax/model/heads.py",
        "c[:, None, :] <= c[:, :, None]",
        "c[:, None, :] < c[:, :, None]",
        "a target token cannot see itself (prefix-LM mask off by one)",
        ("tests/test_finetune_seq2seq.py::test_prefix_lm_mask_rule",),
    ),
    Mutant(
        "model-cache-slot-shifted",
        MODEL,
        "start = (0, index, 0, 0)",
        "start = (0, index + 1, 0, 0)",
        "keys and values written one cache slot late",
        ("tests/test_finetune_seq2seq.py::test_cached_steps_equal_the_full_forward_pass",),
    ),
    Mutant(
        "dev-sample-unseeded",
        "albert_jax/tasks/finetuning.py",
        "np.random.default_rng(SAMPLE_SEED)",
        "np.random.default_rng()",
        "each evaluation sample is drawn afresh: runs and seeds score different dev examples",
        ("tests/test_evals.py::test_a_dev_sample_in_training_and_the_whole_split_at_the_end",),
    ),
    Mutant(
        "dev-sample-ignored",
        "albert_jax/train/trainer.py",
        "        if e.sample:\n",
        "        if False:\n",
        "evals.NAME.sample is ignored: every epoch scores the whole split",
        ("tests/test_evals.py::test_a_dev_sample_in_training_and_the_whole_split_at_the_end",),
    ),
    Mutant(
        "glue-headerless-first-row-lost",
        "albert_jax/data/finetuning/records.py",
        "            header = list(columns)\n",
        "            header = list(columns)\n            continue\n",
        "a file without a header row (GLUE's CoLA) loses its first example as if it were one",
        ("tests/test_glue.py::test_cola_reads_headerless_files_and_a_test_file_with_its_header",),
    ),
    Mutant(
        "positive-f1-micro",
        "albert_jax/scoring/metrics.py",
        'pos_label=positive, average="binary"',
        'pos_label=positive, average="micro"',
        "MRPC / QQP's F1 is the micro average over both classes (= accuracy), not the positive's",
        ("tests/test_glue.py::test_binary_f1_is_the_positive_class_and_matthews_sklearns",),
    ),
    Mutant(
        "shipped-config-shadows-own-file",
        "albert_jax/paths.py",
        "if not path or os.path.exists(path) or is_uri(path):",
        "if not path or is_uri(path):",
        "a shipped config of the same name replaces the user's own config file",
        ("tests/test_packaging.py::test_config_of_ones_own_wins_and_unknown_is_left_as_typed",),
    ),
    Mutant(
        "kept-cell-any-pretraining",
        "albert_jax/experiments/sweep.py",
        'if json.load(f).get("fingerprint") != self.fingerprint():',
        "if False:",
        "a kept cell is restored whatever pretraining it started from",
        ("tests/test_sweep.py::test_kept_cells_are_restored_only_for_their_own_pretraining",),
    ),
    Mutant(
        "trackers-no-sync-at-checkpoint",
        TRAINER,
        "            writer.sync()  # a bucket run's metrics so far reach the bucket",
        "            pass  # a bucket run's metrics so far reach the bucket",
        "a bucket run's metrics reach the bucket only every metrics_sync_s, not at checkpoints",
        (
            "tests/test_trackers.py::"
            "test_a_bucket_run_shows_its_metrics_live_and_a_kill_loses_only_the_unsynced",
        ),
    ),
    Mutant(
        "trackers-parts-read-twice",
        "albert_jax/train/trackers.py",
        "    return _dedupe(rows)\n",
        "    return rows\n",
        "a part left over by a crash is read again beside metrics.jsonl: its rows appear twice",
        (
            "tests/test_trackers.py::"
            "test_a_crash_after_metrics_jsonl_before_the_parts_went_resurrects_nothing",
        ),
    ),
    Mutant(
        "goodput-redone-as-productive",
        "albert_jax/train/goodput.py",
        '"redone" if step <= self.redo_until else "productive"',
        '"productive"',
        "steps a killed run had already taken count as productive when redone",
        ("tests/test_goodput.py::test_a_resumed_run_charges_the_steps_it_redoes",),
    ),
    Mutant(
        "provenance-dirty-never",
        "albert_jax/provenance.py",
        'return {"commit": commit, "dirty": None if status is None else bool(status)}',
        'return {"commit": commit, "dirty": None if status is None else False}',
        "uncommitted changes to the code are not recorded",
        ("tests/test_provenance.py::test_source_tree_reads_commit_and_uncommitted_changes",),
    ),
    Mutant(
        "decoding-beam-stops-early",
        "albert_jax/model/decoding.py",
        "if finished[b] and max(h.score for h in finished[b]) >= bound:",
        "if finished[b]:",
        "beam search stops at the first finished hypothesis",
        (
            "tests/test_finetune_seq2seq.py::test_wide_beam_equals_exhaustive_search_and_beam_one_is_greedy",
        ),
    ),
    # ------------------------------------------------------------------ losses
    Mutant(
        "losses-mlm-denominator-no-eps",
        LOSSES,
        "return jnp.sum(weights.astype(jnp.float32)) + 1e-5",
        "return jnp.sum(weights.astype(jnp.float32))",
        "MLM denominator without the reference's + 1e-5 (NaN on a batch with no predictions)",
        ("tests/test_losses.py",),
    ),
    Mutant(
        "losses-nll-one-hot-off-by-one",
        LOSSES,
        "jax.nn.one_hot(labels, logp.shape[axis], axis=axis, dtype=jnp.bool_)",
        "jax.nn.one_hot(labels + 1, logp.shape[axis], axis=axis, dtype=jnp.bool_)",
        "the cross-entropy picks the log-probability of the next class, not the label's",
        ("tests/test_losses.py",),
    ),
    Mutant(
        "losses-mlm-plain-mean",
        LOSSES,
        "return jnp.sum(cross_entropy(logits, label_ids, weights)) / denominator",
        "return jnp.mean(cross_entropy(logits, label_ids))",
        "MLM loss as a plain mean over all prediction slots, padding included",
        ("tests/test_losses.py",),
    ),
    Mutant(
        "losses-total-without-sop",
        LOSSES,
        'return metrics["mlm_loss"] + metrics["sop_loss"], metrics',
        'return metrics["mlm_loss"], metrics',
        "the SOP loss is reported but not added to the total that is differentiated",
        ("tests/test_losses.py", WIRING),
    ),
    # ------------------------------------------------------------------ pretraining task
    Mutant(
        "pretraining-segment-mask-swapped",
        PRETRAINING,
        'batch["segment_ids"],\n            batch["input_mask"],',
        'batch["input_mask"],\n            batch["segment_ids"],',
        "the pretraining loss passes input_mask as token types and segment_ids as the mask",
        (WIRING,),
    ),
    Mutant(
        "pretraining-eval-dropout",
        PRETRAINING,
        "return self.loss(params, batch, self.normalizers(batch), None)[1]",
        "return self.loss(params, batch, self.normalizers(batch), jax.random.key(0))[1]",
        "evaluation runs with dropout on",
        (WIRING_DROPOUT,),
    ),
    # ------------------------------------------------------------------ optimizer
    Mutant(
        "optim-stacked-ffn-missing",
        OPTIM,
        "own = stacked_paths(model_config)  #",
        'own = frozenset(p for p in stacked_paths(model_config) if "attention/" in p)  #',
        "LAMB treats a stacked FFN leaf as one variable (one trust ratio for all its groups)",
        (
            "tests/test_optim.py::test_grouped_model_updates_each_group_as_its_own_variable"
            "[groups1]",
        ),
    ),
    Mutant(
        "optim-trust-ratio-whole-stack",
        OPTIM,
        "axes = tuple(range(1, u.ndim)) if stacked(path) else None",
        "axes = None",
        "the trust ratio of a stacked leaf is taken over the whole stack, not per group",
        ("tests/test_optim.py::test_stacked_trust_ratio_is_per_layer",),
    ),
    Mutant(
        "optim-exclude-re-match",
        OPTIM,
        "return lambda path: any(c.search(path) for c in compiled)",
        "return lambda path: any(c.match(path) for c in compiled)",
        "exclusion regex anchored at the path start (re.match): LayerNorm and biases decayed",
        ("tests/test_optim.py::test_labels",),
    ),
    Mutant(
        "optim-bias-correction-wrong-beta",
        OPTIM,
        "nu_hat = jax.tree.map(lambda v: v / (1 - b2**t), nu)",
        "nu_hat = jax.tree.map(lambda v: v / (1 - b1**t), nu)",
        "Adam's second-moment bias correction uses b1",
        ("tests/test_optim.py::test_bias_correction_matches_optax",),
    ),
    Mutant(
        "optim-bias-correction-always",
        OPTIM,
        "        if bias_correction:\n            t = count",
        "        if True:\n            t = count",
        "Adam always bias-corrects (optax's default; the reference never does)",
        ("tests/test_optim.py::test_matches_numpy_port_of_reference",),
    ),
    Mutant(
        "optim-adam-eps-inside-sqrt",
        OPTIM,
        "out = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)",
        "out = jax.tree.map(lambda m, v: m / jnp.sqrt(v + eps), mu_hat, nu_hat)",
        "Adam's eps inside the square root",
        ("tests/test_optim.py::test_matches_numpy_port_of_reference",),
    ),
    Mutant(
        "optim-warmup-off-by-one",
        OPTIM,
        "lr = jnp.where(step < warmup_steps, peak_lr * step / warmup_steps, lr)",
        "lr = jnp.where(step < warmup_steps, peak_lr * (step + 1) / warmup_steps, lr)",
        "warmup off by one: the first update already has lr peak / warmup_steps",
        ("tests/test_optim.py::test_schedule",),
    ),
    Mutant(
        "optim-clip-norm-ignored",
        OPTIM,
        "tx = optax.chain(clip_by_global_norm(clip), tx)",
        "tx = optax.chain(clip_by_global_norm(1.0), tx)",
        "the configured clip_norm is ignored (always 1.0, the default)",
        ("tests/test_optim.py::test_make_optimizer_defaults_and_clipping",),
    ),
    Mutant(
        "cli-malloc-per-thread-arenas",
        CLI,
        "settings = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0),",
        "settings = ((_M_MMAP_MAX, 0),",
        "XLA's worker threads keep their own arenas, which mmap and unmap every step's blocks",
        (MALLOC,),
    ),
    Mutant(
        "cli-malloc-not-applied",
        CLI,
        'after `keep_freed_memory()`."""\n    keep_freed_memory()',
        'after `keep_freed_memory()`."""',
        "the entry points leave glibc's allocator as it is",
        (MALLOC,),
    ),
    Mutant(
        "optim-clip-scales-up-small-gradients",
        OPTIM,
        "scale = max_norm / jnp.maximum(norm, max_norm)",
        "scale = max_norm / norm",
        "gradients with a global norm under clip_norm are scaled up to it instead of left alone",
        ("tests/test_optim.py::test_matches_numpy_port_of_reference",),
    ),
    Mutant(
        "optim-clip-after-update",
        OPTIM,
        "tx = optax.chain(clip_by_global_norm(clip), tx)",
        "tx = optax.chain(tx, clip_by_global_norm(clip))",
        "the global-norm clip is applied to the updates instead of the gradients",
        ("tests/test_optim.py::test_matches_numpy_port_of_reference",),
    ),
    # ------------------------------------------------------------------ masking
    Mutant(
        "masking-not-shuffled",
        MASKING,
        "order = rng.permutation(n_words).tolist()",
        "order = list(range(n_words))",
        "masking candidates are taken in order, not shuffled (masks bunch at the start)",
        ("tests/test_data_masking.py::test_masked_positions_spread_over_the_whole_sequence",),
    ),
    Mutant(
        "masking-90-5-5",
        MASKING,
        "np.where(r[:k] < 0.8, np.int32(mask_id)",
        "np.where(r[:k] < 0.9, np.int32(mask_id)",
        "replacement 90/5/5 instead of 80/10/10",
        ("tests/test_data_masking.py::test_replacement_80_10_10",),
    ),
    Mutant(
        "masking-specials-maskable",
        MASKING,
        "cand = np.flatnonzero(~np.asarray(special, np.bool_))",
        "cand = np.arange(length)",
        "[CLS]/[SEP] can be masked",
        ("tests/test_data_masking.py::test_structure_budget_whole_words",),
    ),
    Mutant(
        "masking-budget-floor",
        MASKING,
        "max(1, int(round(length * masked_lm_prob)))",
        "max(1, int(length * masked_lm_prob))",
        "prediction budget floored instead of rounded (the reference uses round)",
        ("tests/test_data_masking.py::test_ngram_probs",),
    ),
    Mutant(
        "masking-overlap-check-first-word",
        MASKING,
        "if count + size > budget or any(covered[s : s + n]):",
        "if count + size > budget or covered[s]:",
        "the overlap check looks at the span's first word only (spans may overlap)",
        (
            "tests/test_data_masking.py::test_structure_budget_whole_words",
            "tests/test_data_masking.py::test_single_token_words_always_fill_the_budget",
        ),
    ),
    # ------------------------------------------------------------------ pairs
    Mutant(
        "pairs-sop-label-flipped",
        PAIRS,
        "label, swapped = 1, True",
        "label, swapped = 0, True",
        "SOP label 0 for a swapped pair",
        ("tests/test_data_pairs.py::test_layout_segments_and_lengths",),
    ),
    Mutant(
        "pairs-segment-ids-off-by-one",
        PAIRS,
        "seg[2 + la :] = 1",
        "seg[1 + la :] = 1",
        "the middle [SEP] gets segment id 1 instead of 0",
        ("tests/test_data_pairs.py::test_layout_segments_and_lengths",),
    ),
    Mutant(
        "pairs-truncate-back-only",
        PAIRS,
        "front = int(np.count_nonzero(rng.random(n) < 0.5))",
        "front = 0",
        "truncation always cuts from the back (the reference picks front/back at random)",
        ("tests/test_data_pairs.py::test_truncation_is_contiguous_and_balanced",),
    ),
    # ------------------------------------------------------------------ pipeline
    Mutant(
        "pipeline-middle-sep-maskable",
        PIPELINE,
        "at = [0, inst.len_a + 1, n - 1]  # [CLS], middle [SEP], final [SEP]",
        "at = [0, inst.len_a, n - 1]  # [CLS], middle [SEP], final [SEP]",
        "the middle [SEP] index is off by one: [SEP] maskable, last token of A never",
        (PD_STATISTICS,),
    ),
    Mutant(
        "pipeline-padding-weights",
        PIPELINE,
        'ex["masked_lm_weights"][:k] = 1.0',
        'ex["masked_lm_weights"][:] = 1.0',
        "padded prediction slots (beyond the masked count) get weight 1",
        (PD_STATISTICS,),
    ),
    Mutant(
        "pipeline-static-masks",
        PIPELINE,
        "mrng = np.random.default_rng([spec.seed, _MASK_STREAM, epoch, doc_id, k])",
        "mrng = np.random.default_rng([spec.seed, _MASK_STREAM, doc_id, k])",
        "masks do not depend on the epoch: every epoch masks a document identically",
        ("tests/test_data_pipeline.py::test_masks_are_redrawn_every_epoch",),
    ),
    Mutant(
        "pipeline-albert-ids-for-any-tokenizer",
        PIPELINE,
        "if (spec.cls_id, spec.sep_id) != (CLS_ID, SEP_ID):",
        "if False:",
        "[CLS]/[SEP] stay ALBERT's SentencePiece ids 2/3 with a WordPiece vocabulary",
        (OWN_WORDPIECE,),
    ),
    Mutant(
        "pipeline-padding-id-zero",
        PIPELINE,
        '"input_ids": np.full(S, spec.pad_id, np.int32),',
        '"input_ids": np.full(S, 1, np.int32),',
        "padding written with another id than the tokenizer's pad",
        (OWN_WORDPIECE,),
    ),
    # ------------------------------------------------------------------ corpus
    Mutant(
        "corpus-hidden-files-read",
        PATHS,
        'names = [n for n in names if not n.startswith(".")]',
        "names = list(names)",
        "hidden files (.DS_Store, editor swap files) in an input directory become documents",
        ("tests/test_own_corpus.py::test_input_files_are_files_directories_and_globs",),
    ),
    Mutant(
        "paths-uri-made-local",
        PATHS,
        'if is_uri(path):\n        return path.rstrip("/")\n',
        "",
        "a bucket URI goes through os.path.abspath (gs://b/run becomes ./gs:/b/run)",
        (BUCKET,),
    ),
    Mutant(
        "checkpoint-load-abspath",
        "albert_jax/checkpoints/checkpoint.py",
        "path = paths.resolve(path)\n    head = load_head(path)",
        "path = os.path.abspath(path)\n    head = load_head(path)",
        "loading a checkpoint makes its path local, so a bucket checkpoint is not found",
        (BUCKET,),
    ),
    Mutant(
        "corpus-glob-local-only",
        DOCUMENTS,
        "    if not paths.is_uri(pattern):\n        return glob.glob",
        "    if True:\n        return glob.glob",
        "input globs are matched on the local disk only: gs://b/texts/*.txt matches nothing",
        (BUCKET,),
    ),
    Mutant(
        "tokenizer-meta-local-read",
        "albert_jax/text/tokenization.py",
        "meta = json.loads(meta_path.read_text())",
        "meta = json.load(open(meta_path))",
        "the tokenizer's settings are read with the local open(): a bucket tokenizer fails",
        (BUCKET,),
    ),
    Mutant(
        "corpus-name-ignores-vocab",
        DOCUMENTS,
        "        int(d.vocab_size),\n",
        "",
        "the corpus name ignores the vocabulary size: another tokenizer reuses a stale corpus",
        ("tests/test_own_corpus.py::test_corpus_name_follows_inputs_and_settings",),
    ),
    Mutant(
        "corpus-parallel-out-of-order",
        PARALLEL,
        "                yield from finish(pending.popleft())\n        while pending:",
        "                yield from finish(pending.pop())\n        while pending:",
        "parallel tokenization yields chunks out of input order",
        ("tests/test_own_corpus.py::test_parallel_preparation_writes_the_same_corpus",),
    ),
    Mutant(
        "corpus-resume-ignores-parts",
        PARALLEL,
        "            saved = parts.load(k)",
        "            saved = None",
        "an interrupted preparation tokenizes everything again (its finished parts are ignored)",
        (
            "tests/test_own_corpus.py::test_an_interrupted_preparation_resumes_from_its_finished_parts",
        ),
    ),
    Mutant(
        "tokenization-reference-mode-strips-marker",
        "albert_jax/text/tokenization.py",
        'strip = mode == "transformers" and piece[0] != SPIECE_UNDERLINE',
        "strip = piece[0] != SPIECE_UNDERLINE",
        "reference mode drops the re-split marker as transformers does (not the original's ids)",
        ("tests/test_tokenization_reference.py",),
    ),
    # ------------------------------------------------------------------ trainer
    Mutant(
        "trainer-rng-not-folded-with-step",
        TRAINER,
        "key = jax.random.fold_in(state.rng, state.step)",
        "key = state.rng",
        "the dropout key is not folded with the step: the same masks at every step",
        (f"{STEP_KEYS}[1]",),
    ),
    Mutant(
        "trainer-accum-divides-twice",
        GRADIENTS,
        "return jax.tree_util.tree_map(jnp.add, carry, (loss, metrics, g)), None",
        "return jax.tree_util.tree_map(lambda c, x: c + x / accum_steps, carry, (loss, metrics, g))"
        ", None",
        "gradient accumulation divides by the number of micro-batches although the loss is "
        "already normalized by the global batch",
        ("tests/test_trainer.py::test_grad_accumulation_matches_full_batch",),
    ),
    Mutant(
        "gradients-left-to-the-partitioner",
        GRADIENTS,
        "manual = tuple(a for a in BATCH_AXES if mesh.shape.get(a, 1) > 1)",
        "manual = ()",
        "the batch axes are not manual: XLA's partitioner places the reductions, once per layer "
        "of the scan and per micro-batch (the same numbers, many more collectives)",
        (
            "tests/test_compile.py::"
            "test_gradients_are_reduced_once_per_step_whatever_the_depth_and_accumulation",
        ),
    ),
    Mutant(
        "trainer-accum-same-key",
        GRADIENTS,
        "k = key if accum_steps == 1 else jax.random.fold_in(key, i)",
        "k = key",
        "every micro-batch of an accumulated step gets the same dropout key",
        (f"{STEP_KEYS}[2]",),
    ),
    Mutant(
        "trainer-micro-batches-contiguous",
        GRADIENTS,
        "return x.reshape(b // steps, steps, *x.shape[1:]).swapaxes(0, 1)",
        "return x.reshape(steps, b // steps, *x.shape[1:])",
        "micro-batch i is a contiguous block of examples instead of every steps-th example",
        ("tests/test_trainer.py::test_grad_accumulation_matches_full_batch",),
        equivalent=(
            "the micro-batches partition the same global batch either way, and loss, metrics and "
            "gradients are sums over all of them with whole-batch normalizers, so only the float "
            "summation order changes (and, with dropout, which example draws which key: an "
            "equally distributed draw); the strided split keeps each device's rows in every "
            "micro-batch, which is load balance, not behaviour"
        ),
    ),
    Mutant(
        "electra-labels-every-masked-position",
        ELECTRA,
        "changed = (sampled != original).astype(jnp.int32)",
        "changed = jnp.ones_like(sampled, jnp.int32)",
        "every masked position is labelled replaced, also where the sample equals the original",
        (f"{ELECTRA_TESTS}::test_model_labels_are_sampled_differs_from_original",),
    ),
    Mutant(
        "electra-padding-slots-written",
        ELECTRA,
        "where = jnp.where(weights > 0, positions, T)",
        "where = positions",
        "padding slots of masked_positions (weight 0, position 0) write a sample into [CLS]",
        (f"{ELECTRA_TESTS}::test_corrupt_writes_samples_at_real_masked_positions_only",),
    ),
    Mutant(
        "electra-discriminator-reads-the-original",
        ELECTRA,
        "out = self.backbone(ids, token_type_ids, attention_mask, deterministic, False)",
        "out = self.backbone(input_ids, token_type_ids, attention_mask, deterministic, False)",
        "the discriminator reads the masked input, not the sequence with the samples written in",
        (f"{ELECTRA_TESTS}::test_model_labels_are_sampled_differs_from_original",),
    ),
    Mutant(
        "electra-soft-sample-leaks-gradient",
        ELECTRA,
        "disc_logits = self.discriminator(out.sequence_output)",
        "disc_logits = self.discriminator(out.sequence_output) + 1e-3 * jnp.mean(mlm_logits)",
        "the discriminator's output depends differentiably on the generator's logits (a soft "
        "sample), so its loss trains the generator",
        (f"{ELECTRA_TESTS}::test_discriminator_loss_sends_no_gradient_into_the_generator",),
    ),
    Mutant(
        "electra-generator-layers-not-stacked",
        PRETRAINING,
        'return sharing.stacked_paths(self.model_config) | {f"generator/{p}" for p in gen}',
        "return sharing.stacked_paths(self.model_config)",
        "the optimizer takes only the discriminator's layer axes: an unshared generator gets one "
        "trust ratio over all its layers",
        (f"{ELECTRA_TESTS}::test_optimizer_takes_each_encoders_layer_axis_from_its_own_layout",),
    ),
    Mutant(
        "electra-flops-generator-forgotten",
        ELECTRA,
        "forward = T * encoder_flops_per_token(gen, T) + mlm_head_flops(gen, predictions)",
        "forward = mlm_head_flops(gen, predictions)",
        "the generator's encoder is left out of the FLOPs (equal-compute comparisons favour "
        "ELECTRA)",
        (f"{ELECTRA_TESTS}::test_flops_count_both_networks_as_xla_does",),
    ),
    Mutant(
        "checkpoints-restore-oldest",
        TRAIN_STATE,
        "for step in sorted(self.manager.all_steps(), reverse=True):",
        "for step in sorted(self.manager.all_steps()):",
        "resume restores the oldest kept checkpoint instead of the newest",
        (
            "tests/test_trainer.py::test_resume_is_bit_exact",
            "tests/test_trainer.py::test_corrupted_latest_checkpoint_falls_back",
        ),
    ),
]

# What .ci/run plants (--ci): the most consequential bugs across the model, the losses, the
# optimizer, masking and the trainer, chosen to run in about five minutes on two cores.
CI_MUTANTS = (
    "model-explicit-attention-no-scale",
    "model-dropout-no-rescale",
    "model-groups-interleaved",
    "losses-mlm-plain-mean",
    "losses-total-without-sop",
    "optim-trust-ratio-whole-stack",
    "optim-exclude-re-match",
    "optim-bias-correction-always",
    "optim-warmup-off-by-one",
    "optim-clip-after-update",
    "masking-90-5-5",
    "masking-specials-maskable",
    "pairs-sop-label-flipped",
    "pipeline-padding-weights",
    "trainer-accum-divides-twice",
    "gradients-left-to-the-partitioner",
)

# ---------------------------------------------------------------------- runner


class StaleMutant(Exception):
    pass


def repo_files() -> list[str]:
    """Tracked files plus untracked ones that git does not ignore (new tests before a commit)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    keep = lambda p: os.path.isfile(os.path.join(REPO, p)) or os.path.islink(os.path.join(REPO, p))
    return sorted({p for p in out.split("\0") if p and keep(p)})


@functools.cache
def test_functions(file: str) -> dict[tuple[str, ...], bool]:
    """The test functions (and methods, as (class, name)) a test file defines: marked slow?"""
    with open(os.path.join(REPO, file), encoding="utf-8") as f:
        tree = ast.parse(f.read())

    def slow(fn) -> bool:
        return any("mark.slow" in ast.unparse(d) for d in fn.decorator_list)

    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[(node.name,)] = slow(node)
        elif isinstance(node, ast.ClassDef):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[(node.name, fn.name)] = slow(fn) or slow(node)
    return found


def check(mutants: list[Mutant]) -> None:
    """Every snippet occurs exactly once in its file (of this checkout) and changes it."""
    problems, seen = [], set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: duplicate id")
        seen.add(m.id)
        path = os.path.join(REPO, m.file)
        if not os.path.isfile(path):
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        with open(path, encoding="utf-8") as f:
            n = f.read().count(m.original)
        if n != 1:
            problems.append(f"{m.id}: the original snippet occurs {n} times in {m.file}")
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
        for t in m.tests:
            file, *names = t.split("::")
            if not t.startswith("tests/") or not os.path.isfile(os.path.join(REPO, file)):
                problems.append(f"{m.id}: test {t!r} is not a file or node id under tests/")
                continue
            if not names:
                continue
            # The function (or class and method) the node id names, without its parameters.
            slow = test_functions(file).get((*names[:-1], names[-1].split("[")[0]))
            if slow is None:
                problems.append(f"{m.id}: {file} defines no test {'::'.join(names)!r}")
            # -m "not slow" runs with a whole file (selection()) and would deselect a slow one.
            if slow and any("::" not in u for u in m.tests):
                problems.append(f"{m.id}: {t} is marked slow but runs beside a whole file")
    if problems:
        raise StaleMutant(
            "stale or malformed mutants (update tests/mutants.py):\n  " + "\n  ".join(problems)
        )


def selection(tests) -> list[str]:
    """pytest arguments for `tests`: a whole file runs its default tier (-m "not slow"); a test
    named by its node id runs even if marked slow (check() keeps the two kinds apart)."""
    return [*(["-m", "not slow"] if any("::" not in t for t in tests) else []), *tests]


def make_copy(files: list[str]) -> str:
    root = tempfile.mkdtemp(prefix="albert-mutants-")
    for p in files:
        dst = os.path.join(root, p)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(os.path.join(REPO, p)):  # configs -> albert_jax/configs
            os.symlink(os.readlink(os.path.join(REPO, p)), dst)
        else:
            shutil.copy2(os.path.join(REPO, p), dst)
    return root


def child_env(root: str) -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    # No .pyc files: a restored and a re-mutated source could share size and mtime second.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_pytest(root: str, args: list[str], timeout: float) -> tuple[int | None, float, str]:
    """(exit code or None on timeout, seconds, output) of pytest in `root`."""
    t0 = time.perf_counter()
    with _ACTIVE_LOCK:
        if _STOPPING.is_set():
            raise KeyboardInterrupt("the mutation check is stopping")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=root,
            env=child_env(root),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # own process group: a timeout ends the test's children too
        )
        _ACTIVE.add(proc)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(proc)
    return rc, time.perf_counter() - t0, out


def stop_active() -> None:
    """Ends the pytest runs still going (on Ctrl-C or an error in the runner)."""
    with _ACTIVE_LOCK:
        _STOPPING.set()
        procs = list(_ACTIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Copy:
    """One worker's copy of the repository: `apply` plants a mutant, `restore` undoes it."""

    def __init__(self, files):
        self.root = make_copy(files)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def apply(self, m: Mutant) -> str:
        with open(self.path(m.file), encoding="utf-8") as f:
            text = f.read()
        if text.count(m.original) != 1:
            raise StaleMutant(f"{m.id}: snippet not found exactly once in the copy of {m.file}")
        with open(self.path(m.file), "w", encoding="utf-8") as f:
            f.write(text.replace(m.original, m.replacement))
        return text

    def restore(self, rel: str, text: str) -> None:
        with open(self.path(rel), "w", encoding="utf-8") as f:
            f.write(text)


def canary(copy: Copy, timeout: float) -> None:
    """A copy whose albert_jax raises on import must fail: the tests import the copy."""
    init = "albert_jax/__init__.py"
    with open(copy.path(init), encoding="utf-8") as f:
        text = f.read()
    copy.restore(init, f"raise RuntimeError({CANARY!r})\n" + text)
    try:
        args = [*PYTEST, *selection(["tests/test_losses.py"])]
        rc, secs, out = run_pytest(copy.root, args, timeout)
    finally:
        copy.restore(init, text)
    if rc == 0 or CANARY not in out:
        sys.exit(
            "canary: a copy with a broken albert_jax did not fail as expected, so the tests do "
            f"not import the copy (exit code {rc}):\n{out[-3000:]}"
        )
    print(f"canary: broken copy fails as it should ({secs:.1f}s)", flush=True)


def baseline(copy: Copy, mutants: list[Mutant], workers: int, timeout: float) -> None:
    """Every selected test passes on the unmutated copy (else a 'kill' would mean nothing)."""
    tests = sorted({t for m in mutants for t in m.tests})
    xdist = ["-p", "xdist", "-n", str(workers)] if workers > 1 else []
    secs = 0.0
    for group in ([t for t in tests if "::" not in t], [t for t in tests if "::" in t]):
        if group:  # whole files (their default tier) apart from named tests (slow ones too)
            rc, s, out = run_pytest(copy.root, [*PYTEST_BASE, *xdist, *selection(group)], timeout)
            if rc != 0:
                sys.exit(f"baseline: the mutants' tests fail unmutated (exit {rc}):\n{out}")
            secs += s
    print(f"baseline: {len(tests)} test selections pass unmutated ({secs:.1f}s)", flush=True)


def run_one(copies: queue.Queue, m: Mutant, timeout: float) -> dict:
    copy = copies.get()
    try:
        original = copy.apply(m)
        try:
            rc, secs, out = run_pytest(copy.root, [*PYTEST, *selection(m.tests)], timeout)
        finally:
            copy.restore(m.file, original)
    finally:
        copies.put(copy)
    if rc is None:
        result = "timeout"
    elif rc in (1, 2):  # test failure, or a collection error caused by the mutant
        result = "killed"
    elif rc == 0:
        result = "equivalent" if m.equivalent else "survived"
    else:  # 3 internal error, 4 usage, 5 nothing collected (a deselected or missing test)
        result = "error"
    return {
        "id": m.id,
        "file": m.file,
        "description": m.description,
        "tests": list(m.tests),
        "equivalent": m.equivalent,
        "result": result,
        "returncode": rc,
        "seconds": round(secs, 1),
        "output_tail": out[-4000:] if result != "killed" else out[-800:],
    }


def table(results: list[dict]) -> str:
    rows = [("id", "module", "result", "seconds", "description")]
    for r in results:
        module = os.path.splitext(r["file"].removeprefix("albert_jax/"))[0]
        result = r["result"] + (
            " (marked equivalent!)" if r["result"] == "killed" and r["equivalent"] else ""
        )
        rows.append((r["id"], module, result, f"{r['seconds']:.1f}", r["description"]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the mutants (after checking them)")
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--ci", action="store_true", help="the subset CI runs (CI_MUTANTS)")
    ap.add_argument("--json", metavar="OUT", help="write the results as JSON")
    ap.add_argument("-j", type=int, default=1, metavar="N", help="parallel workers (own copies)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per mutant (default 900)")
    ap.add_argument(
        "--skip-baseline", action="store_true", help="do not run the tests on the unmutated copy"
    )
    args = ap.parse_args(argv)

    mutants = MUTANTS
    if args.ci:
        args.only = ",".join([args.only, *CI_MUTANTS])
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        known = {m.id for m in MUTANTS}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            ap.error(f"unknown mutant ids: {', '.join(unknown)} (see --list)")
        mutants = [m for m in MUTANTS if m.id in wanted]
    try:
        check(mutants)
    except StaleMutant as e:
        print(e, file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            eq = f"\n    equivalent: {m.equivalent}" if m.equivalent else ""
            print(f"{m.id}  [{m.file}]\n    {m.description}\n    tests: {' '.join(m.tests)}{eq}")
        return 0

    def terminate(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)  # clean up (copies, running tests) as on Ctrl-C
    t0 = time.perf_counter()
    files = repo_files()
    workers = max(1, min(args.j, len(mutants)))
    copies: queue.Queue = queue.Queue()
    made = [Copy(files) for _ in range(workers)]
    for c in made:
        copies.put(c)
    results = {}
    pool = ThreadPoolExecutor(workers)
    try:
        canary(made[0], args.timeout)
        if not args.skip_baseline:
            baseline(made[0], mutants, workers, args.timeout * 2)
        pending = {pool.submit(run_one, copies, m, args.timeout) for m in mutants}
        while pending:
            # A timed wait, so that Ctrl-C / SIGTERM are handled promptly.
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                r = fut.result()
                results[r["id"]] = r
                print(
                    f"[{len(results)}/{len(mutants)}] {r['result']:<10} {r['seconds']:7.1f}s"
                    f"  {r['id']}",
                    flush=True,
                )
                if r["result"] in ("survived", "error", "timeout"):
                    print("    " + r["output_tail"][-1500:].replace("\n", "\n    "), flush=True)
    finally:
        stop_active()  # only after an interruption is anything still running
        pool.shutdown(wait=True, cancel_futures=True)
        for c in made:
            shutil.rmtree(c.root, ignore_errors=True)
    ordered = [results[m.id] for m in mutants]
    total = time.perf_counter() - t0
    print()
    print(table(ordered))
    counts = {}
    for r in ordered:
        counts[r["result"]] = counts.get(r["result"], 0) + 1
    print(
        f"\n{len(ordered)} mutants: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + f"; {total:.0f}s with {workers} worker(s)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": round(total, 1), "results": ordered}, f, indent=2)
    bad = [r for r in ordered if r["result"] in ("survived", "error", "timeout")]
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted: running tests stopped, temporary copies removed", file=sys.stderr)
        sys.exit(130)

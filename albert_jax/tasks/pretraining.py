"""The pretraining tasks: MLM + SOP / NSP, MLM alone, and ELECTRA, on the one grain pipeline.

`config.objective` picks the task (`make_task`): 'mlm+sop' (the reference), 'mlm+nsp' (the
pairs of `data.mode='nsp'`), 'mlm' (no sentence head) or 'electra' (`albert_jax.model.electra`: the
masked batch feeds a generator whose samples a discriminator detects; `config.electra` sizes
it). Losses are `albert_jax.model.losses` (as run_pretraining.py) with the whole global batch's
denominators, so gradient accumulation reproduces the full batch.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.data.pretraining import corpus, pair_check, pairs
from albert_jax.data.pretraining.config import DataConfig
from albert_jax.data.pretraining.pipeline import make_iterator, small_split_error
from albert_jax.errors import InputError
from albert_jax.model import electra, sharing
from albert_jax.model.albert import AlbertForPreTraining
from albert_jax.model.config import Execution
from albert_jax.model.flops import train_flops_per_sequence
from albert_jax.model.losses import mlm_denominator, pretraining_loss
from albert_jax.scoring import floors
from albert_jax.tasks.pretrain_config import OBJECTIVES, PRETRAIN_EVALS, PretrainConfig
from albert_jax.train.task import Callbacks, Evaluator, Job, Start, Task
from albert_jax.train.workdir import load_workdir, workdir_steps

# Batch fields the evaluation's majority baselines are computed from.
BASELINE_KEYS = ("masked_lm_ids", "masked_lm_weights", "sentence_order_label")

log = logging.getLogger(__name__)


class ObjectiveError(InputError):
    pass


def objective_of(config) -> str:
    """The run's objective, checked against the data section (the sentence pairs it builds):
    'mlm+nsp' takes data.mode 'nsp' (`objective_leaves`), and data.mode='nsp' under 'mlm+sop'
    is a contradiction, not silently SOP."""
    pretrain = PretrainConfig.from_config(config)
    objective = pretrain.objective
    if objective not in OBJECTIVES:
        raise ObjectiveError(f"objective {objective!r}: expected one of {list(OBJECTIVES)}")
    mode = DataConfig.from_config(config.data if "data" in config else {}).mode
    if objective == "mlm+sop" and mode != "sop":
        raise ObjectiveError(
            f"objective 'mlm+sop' but data.mode is {mode!r}: for next-sentence prediction use "
            f"--config.objective=mlm+{mode}"
        )
    if pretrain.cross_eval and objective == "mlm":
        raise ObjectiveError("cross_eval scores the sentence head: objective 'mlm' has none")
    return objective


def objective_leaves(config) -> dict[str, str]:
    """The data leaves the objective implies, for the run's `Plan`: 'mlm+nsp' builds
    next-sentence pairs (data.mode 'nsp'; the run's config.json then says so)."""
    if objective_of(config) == "mlm+nsp" and DataConfig.from_config(config.data).mode != "nsp":
        return {"data.mode": "nsp"}
    return {}


def clamp_warmup(config, given: bool) -> dict[str, int]:
    """The optimizer leaves for the run's `Plan`: a run shorter than its config's warmup
    (`--config.total_steps=20` against 100 warmup steps) warms up over the whole run, with a
    note. A warmup given on the command line (`given`) is left to `OptimConfig.check`, which
    refuses it."""
    warmup, total = int(config.optim.warmup_steps), int(config.optim.total_steps)
    if given or not 0 < total < warmup:
        return {}
    print(
        f"note: optim.warmup_steps {warmup} > total_steps {total}: warming up over all "
        f"{total} steps (--config.optim.warmup_steps sets it)",
        flush=True,
    )
    return {"warmup_steps": total}


def make_task(config, data_config, model_config, pretrained=None):
    """The task of `config.objective` on `model_config` (an `AlbertConfig`: the run config's
    model, `presets.from_run_config`, or a starting checkpoint's), run as `config.execution`
    says."""
    objective = objective_of(config)
    if objective == "electra":
        return ElectraTask(config, data_config, model_config, pretrained)
    return PretrainingTask(config, data_config, model_config, pretrained)


class PretrainingTask(Task, Evaluator):
    """MLM + SOP/NSP (or MLM-only) pretraining: the task model and its evaluator (held-out
    batches, `predict` then `score`); `job()` is what the trainer runs."""

    init_source = "pretrained weights"
    mlm_head = "MLM"  # what the learned-nothing warning calls the MLM head

    def __init__(self, config, data_config, model_config, pretrained=None):
        """`pretrained`: a `Source` to start from (continued pretraining); the trainer loads its
        parameters unless the run resumes from its own checkpoint."""
        self.config = config
        self.objective = objective_of(config)
        if self.objective == "mlm+nsp" and DataConfig.from_config(data_config).mode != "nsp":
            data_config = data_config.copy_and_resolve_references()
            with data_config.unlocked():
                data_config.mode = "nsp"
        self.data = data_config
        self.model_config = model_config
        self.execution = Execution.from_config(config.execution)
        self.pretrained = pretrained
        if pretrained is not None:
            self.init_source = pretrained.location
        self.sentence_head = self.objective != "mlm"
        self.model = AlbertForPreTraining(
            self.model_config, self.execution, sentence_head=self.sentence_head
        )
        sentence = ("sop_accuracy",) if self.sentence_head else ()
        self.progress_keys = ("loss", "mlm_accuracy", *sentence, "learning_rate")
        self.global_batch_size = int(data_config.global_batch_size)
        self.seq_length = int(data_config.max_seq_length)
        # The run's length, for the learned-nothing warning's "meaningful share" (a FLOPs
        # budget's steps are set here once known: `albert_jax/pretrain/__main__.py`).
        self.total_steps = int(config.total_steps)
        self._warned: dict[str, int] = {}  # head ('mlm' / 'sop') -> the step it was warned at
        self._one_sentence: tuple[int, int] | None = None  # (one-sentence, sampled) documents

    def job(self) -> Job:
        """The trainer's job: this task with its training batches, evaluation and start."""
        return Job(
            self,
            self.train_iterator,
            self.global_batch_size,
            self.seq_length,
            self.flops_per_example(),
            evaluator=self,
            start=Start(self.pretrained_params, source=self.init_source),
            callbacks=Callbacks(progress_keys=self.progress_keys),
            evals=PRETRAIN_EVALS,
        )

    def _mode(self) -> str:
        """The sentence task of the data section's pairs ('sop' / 'nsp')."""
        return DataConfig.from_config(self.data).mode

    def pretrained_params(self):
        from flax import traverse_util

        if self.pretrained is None:
            return None
        return traverse_util.flatten_dict(self.pretrained.params, sep="/")

    def dummy_batch(self):
        ids = jnp.zeros((1, 8), jnp.int32)
        return {"input_ids": ids, "masked_positions": jnp.zeros((1, 2), jnp.int32)}

    def batch_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
        """One global batch's fields as the pipeline makes them (`make_iterator`), abstract: what
        `pretrain.compile` builds the step for without reading data."""
        B, S, P = self.global_batch_size, self.seq_length, int(self.data.max_predictions)
        spec = lambda shape, dtype=jnp.int32: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731
        return {
            "input_ids": spec((B, S)),
            "input_mask": spec((B, S)),
            "segment_ids": spec((B, S)),
            "masked_lm_positions": spec((B, P)),
            "masked_lm_ids": spec((B, P)),
            "masked_lm_weights": spec((B, P), jnp.float32),
            "sentence_order_label": spec((B,)),
        }

    def normalizers(self, batch):
        return {
            "mlm": mlm_denominator(batch["masked_lm_weights"]),
            "sop": jnp.asarray(batch["input_ids"].shape[0], jnp.float32),
        }

    def _apply(self, params, batch, dropout_rng, **kwargs):
        """The model on a batch (dropout with `dropout_rng`; None: evaluation)."""
        return self.model.apply(
            {"params": params},
            batch["input_ids"],
            batch["segment_ids"],
            batch["input_mask"],
            masked_positions=batch["masked_lm_positions"],
            deterministic=dropout_rng is None,
            rngs=None if dropout_rng is None else {"dropout": dropout_rng},
            **kwargs,
        )

    def loss(self, params, batch, norms, rng):
        return pretraining_loss(self._apply(params, batch, rng), batch, norms)

    def _iterator(self, split, process_index, process_count, data=None, **kwargs):
        return make_iterator(
            data if data is not None else self.data,
            split,
            process_index,
            process_count,
            model_vocab_size=self.model_config.vocab_size,
            **kwargs,
        )

    def train_iterator(self, process_index, process_count):
        return self._iterator(self.config.train_split, process_index, process_count)

    def eval_iterator(self, process_index, process_count, mode: str | None = None):
        """The same held-out batches at every evaluation (in-process: no worker start-up); with
        `mode` ('sop' / 'nsp'), the pairs are built for that sentence task instead."""
        data = self.data
        if mode is not None and mode != self._mode():
            data = data.copy_and_resolve_references()
            with data.unlocked():
                data.mode = mode
        return self._iterator(
            self.config.eval_split, process_index, process_count, data, worker_count=0, num_epochs=1
        )

    def check_eval_split(self) -> None:
        """An eval split that fills no batch, refused before training (not `eval_every` steps
        in, at the first evaluation)."""
        if int(self.config.eval_every) > 0:
            where = (jax.process_index(), jax.process_count())
            if next(self.eval_iterator(*where), None) is None:
                raise small_split_error(self.data, self.config.eval_split, self.global_batch_size)

    def eval_step(self, params, batch):
        return self.loss(params, batch, self.normalizers(batch), None)[1]

    def predict(self, run, split=None) -> dict[str, list]:
        """Per sentence task (the run's own and, with `config.cross_eval`, the other: the paper's
        Table 5, a model trained for one scored on the other), per held-out batch: eval_step's
        outputs and the whole global batch's targets the majority baselines are computed from
        (`BASELINE_KEYS`). `config.eval_batches` batches, or as many full ones as one pass over
        the split gives: the same batches at every evaluation."""
        del split
        own = self._mode()
        modes = pairs.MODES if PretrainConfig.from_config(self.config).cross_eval else (own,)
        return {m: self._predict_mode(run, m) for m in (own, *(m for m in modes if m != own))}

    def _predict_mode(self, run, mode) -> list[tuple[dict, dict]]:
        where = (jax.process_index(), jax.process_count())
        own = mode == self._mode()
        it = self.eval_iterator(*where) if own else self.eval_iterator(*where, mode)
        batches = []
        for batch in itertools.islice(it, int(self.config.eval_batches)):
            # The whole global batch's, as `run`'s metrics are (each process holds a slice).
            host = _gather_host({k: batch[k] for k in BASELINE_KEYS if k in batch})
            batches.append((run(batch), host))
        if not batches:
            raise small_split_error(self.data, self.config.eval_split, self.global_batch_size)
        return batches

    def score(self, split, predictions) -> dict[str, float]:
        """The mean of the per-batch metrics (every batch is full and has the same size, so each
        weighs the same), beside the floors the accuracies must clear on the same batches:
        `mlm_majority_accuracy` (always predicting the most frequent target piece) and
        `sop_majority_share` (always answering the more frequent sentence label). With
        `config.cross_eval` also `sop_task_accuracy` and `nsp_task_accuracy`, each beside the
        accuracy of always answering the more frequent label on those pairs (`..._task_majority`;
        with the reference's random-document B for one-segment chunks, SOP pairs are not
        50/50)."""
        del split
        own = self._mode()
        metrics = self._score_mode(predictions[own])
        if len(predictions) > 1:
            for mode in pairs.MODES:
                m = metrics if mode == own else self._score_mode(predictions[mode])
                metrics[f"{mode}_task_accuracy"] = m["sop_accuracy"]
                metrics[f"{mode}_task_majority"] = m["sop_majority_share"]
        return metrics

    def _score_mode(self, batches) -> dict[str, float]:
        """The metrics of one sentence task's batches, each floor beside its accuracy and, after
        the floor, whether the accuracy is within noise of it (`..._learned_nothing`, 1.0 / 0.0:
        `albert_jax.scoring.floors.within_noise` on the evaluated pairs / masked tokens; at
        every evaluation, the warning only past `floors.MIN_RUN_SHARE` of the run)."""
        sums: dict[str, float] = {}
        per_token: dict[str, list[np.ndarray]] = {}  # arrays from eval_step, for `token_metrics`
        targets: list[tuple[np.ndarray, np.ndarray]] = []  # (masked_lm_ids, weights) per batch
        labels: list[np.ndarray] = []
        for values, host in batches:
            if "masked_lm_ids" in host:
                targets.append((host["masked_lm_ids"], host["masked_lm_weights"]))
            if "sentence_order_label" in host:
                labels.append(host["sentence_order_label"])
            for k, v in values.items():
                if np.ndim(v):
                    per_token.setdefault(k, []).append(np.asarray(v))
                else:
                    sums[k] = sums.get(k, 0.0) + float(v)
        metrics = {k: v / len(batches) for k, v in sums.items()}
        # Printed next to the accuracy they bound (the eval line keeps the dict's order).
        if "mlm_accuracy" in metrics and targets:
            floor = mlm_majority_accuracy(*zip(*targets, strict=True))
            metrics = _beside(metrics, "mlm_accuracy", "mlm_majority_accuracy", floor)
            n = float(sum(np.sum(w) for _, w in targets))
            flat = floors.within_noise(metrics["mlm_accuracy"], floor, n)
            metrics = _beside(metrics, "mlm_majority_accuracy", "mlm_learned_nothing", float(flat))
        if "sop_accuracy" in metrics and labels:
            share = float(np.mean([np.mean(b) for b in labels]))  # of label 1
            share = max(share, 1.0 - share)
            metrics = _beside(metrics, "sop_accuracy", "sop_majority_share", share)
            n = float(sum(np.size(b) for b in labels))
            flat = floors.within_noise(metrics["sop_accuracy"], share, n)
            metrics = _beside(metrics, "sop_majority_share", "sop_learned_nothing", float(flat))
        return self.token_metrics(per_token, metrics)

    def check(self, split, step, predictions, metrics) -> None:
        """One `warning:` line per head (console and train.log) whose accuracy is within noise
        of its floor (`mlm_learned_nothing` / `sop_learned_nothing`) once `floors.MIN_RUN_SHARE`
        of the run has passed: at the first such evaluation, and again at the last one (step
        `total_steps`) if it still holds, never at those between (each row keeps the flag).
        Process 0; the run's own sentence task only (not `cross_eval`'s other one)."""
        del split
        if jax.process_index() != 0 or not floors.meaningful_share(step, self.total_steps):
            return
        final = step >= self.total_steps
        for head in ("mlm", "sop"):
            if not metrics.get(f"{head}_learned_nothing"):
                continue
            if head in self._warned and (not final or self._warned[head] == step):
                continue
            batches = predictions[self._mode()]
            warning = self._mlm_warning if head == "mlm" else self._sentence_warning
            line = warning(step, metrics, batches)
            self._warned[head] = step
            tqdm.write(line, file=sys.stderr)  # above the progress bar, if one is drawn
            log.info(line)  # train.log (the console shows warnings, not INFO)

    def _mlm_warning(self, step, metrics, batches) -> str:
        ids = [host["masked_lm_ids"] for _, host in batches]
        weights = [host["masked_lm_weights"] for _, host in batches]
        top = majority_piece(ids, weights)
        piece = f"id {top}"
        try:  # the piece itself, from the corpus's tokenizer
            piece = f"{corpus.corpus_tokenizer(self.data).convert_ids_to_tokens([top])[0]!r}"
        except Exception:  # noqa: BLE001 (a warning never stops a run; the id says enough)
            pass
        optim = self.config.optim
        causes = [
            f"the learning rate (too low or too high: optim.learning_rate={optim.learning_rate:g})",
            f"too few steps (total_steps={self.total_steps})",
            "the tokenizer (the pieces it cuts the text into: `python -m pretrain.inspect_data` "
            "shows them)",
        ]
        return floors.learned_nothing_warning(
            self.mlm_head,
            step,
            self.total_steps,
            "mlm_accuracy",
            metrics["mlm_accuracy"],
            metrics["mlm_majority_accuracy"],
            f"always predicting {piece} (the most frequent masked piece)",
            sum(float(np.sum(w)) for w in weights),
            "masked tokens",
            causes,
        )

    def _sentence_warning(self, step, metrics, batches) -> str:
        mode = self._mode()
        n = sum(np.size(host["sentence_order_label"]) for _, host in batches)
        causes = []
        ones, sampled = self.one_sentence_documents()
        if mode == "sop" and sampled and ones / sampled > pair_check.ONE_SENTENCE_LIMIT:
            causes.append(
                f"the corpus's documents have no sentence boundaries ({ones} of {sampled} "
                f"sampled documents, {100.0 * ones / sampled:.0f} %, are one sentence), so its "
                "pairs are not two stretches of text in sentence order: split the text into "
                "sentences (punctuation, or one sentence a line with data.input_format=text) "
                "or use a corpus with punctuation"
            )
        causes += [
            f"the learning rate (optim.learning_rate={self.config.optim.learning_rate:g})",
            f"too few steps (total_steps={self.total_steps}; the sentence head learns later "
            "than MLM)",
        ]
        return floors.learned_nothing_warning(
            "sentence order (SOP)" if mode == "sop" else "next-sentence prediction (NSP)",
            step,
            self.total_steps,
            "sop_accuracy",
            metrics["sop_accuracy"],
            metrics["sop_majority_share"],
            "always answering the majority label",
            float(n),
            "pairs",
            causes,
        )

    def one_sentence_documents(self) -> tuple[int, int]:
        """(one-sentence documents, documents sampled) of the built corpus
        (`pair_check.sentence_counts`: its first stored documents, in the store's shuffled
        order); (0, 0) when it cannot be read. Read once."""
        if self._one_sentence is None:
            try:
                counts = np.asarray(pair_check.sentence_counts(self.data))
                self._one_sentence = (int(np.sum(counts <= 1)), int(counts.size))
            except Exception:  # noqa: BLE001 (a warning never stops a run: no share then)
                self._one_sentence = (0, 0)
        return self._one_sentence

    def token_metrics(self, per_token, metrics) -> dict[str, float]:
        """`metrics` plus those of all the evaluated batches' per-token arrays (none here)."""
        del per_token
        return metrics

    def flops_per_example(self) -> float:
        return train_flops_per_sequence(
            self.model_config, int(self.data.max_seq_length), int(self.data.max_predictions)
        )


def majority_piece(ids, weights) -> int:
    """The most frequent (by weight) piece among all the evaluated targets. `ids`, `weights`:
    one [B, P] array per batch."""
    counts = np.bincount(
        np.concatenate([np.ravel(i) for i in ids]).astype(np.int64),
        weights=np.concatenate([np.ravel(w) for w in weights]).astype(np.float64),
    )
    return int(np.argmax(counts))


def mlm_majority_accuracy(ids, weights) -> float:
    """The held-out MLM accuracy of always predicting one piece, the most frequent (by weight)
    among all the evaluated targets (`majority_piece`): the best constant predictor, the floor
    a model must beat. Per batch with mlm_accuracy's weights and denominator, then averaged
    over the batches as `score` averages mlm_accuracy. `ids`, `weights`: one [B, P] array per
    batch."""
    top = majority_piece(ids, weights)
    w = [np.asarray(w, np.float64) for w in weights]
    per_batch = [
        np.sum(wb * (np.asarray(i) == top)) / (np.sum(wb) + 1e-5)
        for i, wb in zip(ids, w, strict=True)
    ]
    return float(np.mean(per_batch))


def _beside(metrics: dict, after: str, key: str, value: float) -> dict:
    """`metrics` with `key` inserted right after `after`."""
    out = {}
    for k, v in metrics.items():
        out[k] = v
        if k == after:
            out[key] = value
    return out


def _gather_host(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each process's slice of the global batch -> the whole batch (host NumPy)."""
    if jax.process_count() == 1:
        return {k: np.asarray(v) for k, v in arrays.items()}
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(arrays, tiled=True)


class ElectraTask(PretrainingTask):
    """ELECTRA replaced-token detection (`albert_jax.model.electra`) on the same masked batches: the
    train state holds generator and discriminator; `write_model` keeps the discriminator."""

    mlm_head = "MLM (the generator)"

    def __init__(self, config, data_config, model_config, pretrained=None):
        super().__init__(config, data_config, model_config, pretrained)
        pretrain = PretrainConfig.from_config(config)
        e = pretrain.electra
        if float(config.optim.layerwise_decay) != 1.0:
            raise ObjectiveError(
                "optim.layerwise_decay is a fine-tuning setting (one encoder's depth); ELECTRA "
                "pretraining has two encoders: leave it at 1 (fine-tune the discriminator with it)"
            )
        self.weight = float(e.disc_weight)
        self.sentence_head = bool(e.sentence_head)
        try:
            self.generator_config = electra.generator_config(
                self.model_config,
                float(e.generator_fraction),
                str(e.generator_layout),
                int(e.generator_layers),
            )
        except ValueError as err:
            raise ObjectiveError(f"config.electra: {err}") from err
        self.model = electra.ElectraForPreTraining(
            self.model_config,
            self.execution,
            generator_config=self.generator_config,
            sentence_head=self.sentence_head,
        )
        sentence = ("sop_accuracy",) if self.sentence_head else ()
        self.progress_keys = ("loss", "mlm_accuracy", "disc_accuracy", *sentence, "learning_rate")
        if pretrain.cross_eval and not self.sentence_head:
            raise ObjectiveError(
                "cross_eval needs the sentence head: --config.electra.sentence_head=True"
            )

    def stacked_paths(self) -> frozenset[str]:
        """Both encoders' layer-axis leaves, each under its own layout."""
        gen = sharing.stacked_paths(self.generator_config)
        return sharing.stacked_paths(self.model_config) | {f"generator/{p}" for p in gen}

    def normalizers(self, batch):
        return electra.normalizers(batch)

    def _outputs(self, params, batch, rng):
        # Evaluation samples with a fixed key: the same corruption at every evaluation.
        key = jax.random.key(0) if rng is None else jax.random.fold_in(rng, 1)
        return self._apply(
            params,
            batch,
            None if rng is None else jax.random.fold_in(rng, 0),
            masked_lm_ids=batch["masked_lm_ids"],
            masked_lm_weights=batch["masked_lm_weights"],
            sample_key=key,
        )

    def loss(self, params, batch, norms, rng):
        return electra.loss(self._outputs(params, batch, rng), batch, norms, self.weight)

    def finish_metrics(self, metrics):
        return electra.finish_metrics(metrics)

    def eval_step(self, params, batch):
        out = self._outputs(params, batch, None)
        metrics = electra.loss(out, batch, self.normalizers(batch), self.weight)[1]
        return {**self.finish_metrics(metrics), **electra.auc_inputs(out, batch)}

    def token_metrics(self, per_token, metrics) -> dict[str, float]:
        """`disc_auc` (as the reference's) over every non-padding token of the evaluated batches,
        printed after disc_accuracy."""
        if "disc_token_labels" not in per_token:  # an eval_step without the per-token arrays
            return metrics
        labels = np.concatenate([np.ravel(x) for x in per_token["disc_token_labels"]])
        logits = np.concatenate([np.ravel(x) for x in per_token["disc_token_logits"]])
        real = labels >= 0
        auc = electra.disc_auc(labels[real], logits[real])
        return _beside(metrics, "disc_accuracy", "disc_auc", auc)

    def flops_per_example(self) -> float:
        return electra.train_flops_per_sequence(
            self.model_config,
            self.generator_config,
            int(self.data.max_seq_length),
            int(self.data.max_predictions),
            self.sentence_head,
        )


def write_model(workdir: str, total_steps: int) -> str | None:
    """WORKDIR/model from the newest train-state checkpoint, if the run got to `total_steps` (a
    preempted run is resumed later and writes it then); returns its path. The parameters come
    from disk, so nothing sharded is gathered and only this process takes part."""
    steps = workdir_steps(workdir)
    if not steps or steps[-1] < total_steps:
        print(f"stopped before step {total_steps}: {workdir}/model not written", flush=True)
        return None
    source = load_workdir(workdir)
    for note in source.notes:
        print(f"note: {note}", flush=True)
    config, params = source.config, source.params
    tok = source.tokenizer
    if tok is not None and tok.vocab_size < config.vocab_size:  # data.hard_vocab_limit=False
        config, params = trim_vocab(config, params, tok.vocab_size)
        print(f"note: vocabulary rows past the tokenizer's {tok.vocab_size} dropped", flush=True)
    out = paths.join(workdir, "model")
    info = {"source": paths.resolve(workdir), "step": source.step}
    checkpoint.save(out, config, params, tokenizer=tok, info=info)
    print(json.dumps({"model": out, "step": source.step}), flush=True)
    return out


VOCAB_LEAVES = ("word_embeddings", "output_bias")  # the parameters with a vocabulary axis (0)


def trim_vocab(config, params, size: int):
    """(config, params) with the first `size` vocabulary rows only: a model pretrained with more
    rows than its tokenizer has pieces (`data.hard_vocab_limit=False`) never sees the others as
    inputs or targets, so the model a checkpoint holds matches its tokenizer."""
    from flax import traverse_util

    flat = traverse_util.flatten_dict(params, sep="/")
    for path, leaf in flat.items():
        if path.rsplit("/", 1)[-1] in VOCAB_LEAVES and leaf.shape[0] == config.vocab_size:
            flat[path] = leaf[:size]
    return config.replace(vocab_size=size), traverse_util.unflatten_dict(flat, sep="/")

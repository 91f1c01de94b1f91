"""UniLM seq2seq fine-tuning: `[CLS] source [SEP] target [SEP]` under the prefix-LM mask, the
next-token loss on the target through the pretrained MLM head, and evaluation by generating
(greedy or beam search with a key/value cache, `albert_jax.model.decoding`) and scoring the texts.

Data: JSONL `{source, target}` (`albert_jax.data.finetuning.textgen`). Every source is cut to leave
room for `max_target_length` pieces, so the rows trained on and the rows generated from are the
same.
Evaluation reports the generation metrics (exact match, character F1, BLEU, ROUGE-L), the
teacher-forced `loss` and `token_accuracy`, and with `task.entity_scores` the entity-level
precision / recall / F1 of the People's Daily entity lists. Generation runs in one process.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from albert_jax.data.finetuning import textgen
from albert_jax.data.finetuning.records import _special_ids
from albert_jax.model import decoding
from albert_jax.model.losses import cross_entropy
from albert_jax.scoring import generation
from albert_jax.scoring import metrics as M
from albert_jax.tasks.finetune_config import Seq2SeqSettings
from albert_jax.tasks.finetuning import (
    INPUTS,
    FinetuneError,
    FinetuneReader,
    FinetuneTask,
    predict_all,
)


class Seq2SeqTask(FinetuneTask):
    targets = ("labels", "source_length")
    head_pattern = None  # the pretrained MLM head generates: no fresh head to name

    def __init__(self, config, data, workdir=None):
        super().__init__(config, data, workdir)
        self.max_new = int(self.head["max_target_length"]) + 1  # the target's pieces and [SEP]
        self.decoder = decoding.Decoder(self.model, self.max_new)

    def _target_logits(self, params, batch, rng):
        """Logits at the positions that predict the target ([B, max_new, V]) and their labels:
        from the source's closing [SEP] on (the MLM head runs on these positions only)."""
        T = batch["input_ids"].shape[1]
        pos = jnp.minimum(batch["source_length"][:, None] - 1 + jnp.arange(self.max_new), T - 1)
        logits = self.model.apply(
            {"params": params}, *(batch[k] for k in INPUTS), deterministic=rng is None,
            rngs=None if rng is None else {"dropout": rng}, positions=pos,
        ).logits  # fmt: skip
        return logits, jnp.take_along_axis(batch["labels"], pos, axis=1)

    def normalizers(self, batch):
        return {"tokens": jnp.maximum(jnp.sum(batch["labels"] >= 0), 1).astype(jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits, labels = self._target_logits(params, batch, rng)
        nll, correct = _token_nll(logits, labels)
        n = norms["tokens"]
        return jnp.sum(nll) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        """Per example: the target's summed NLL, its token count and correct next tokens."""
        logits, labels = self._target_logits(params, batch, None)
        nll, correct = _token_nll(logits, labels)
        count = jnp.sum(labels >= 0, axis=1)
        return jnp.stack([jnp.sum(nll, 1), count, jnp.sum(correct, 1)], -1).astype(jnp.float32)

    def generate(self, params, feats) -> list[list[int]]:
        """Generated ids for every row, in batches of eval_batch_size (the last one padded)."""
        if jax.process_count() > 1:
            raise FinetuneError("seq2seq generation runs in one process; evaluate on one host")
        n, B = len(feats["input_ids"]), self.eval_batch_size
        src_len = feats["source_length"]
        S = int(src_len.max()) if n else 1
        h, out = self.head, []
        end_id = _special_ids(self.data.tokenizer)[1]  # [SEP]
        for lo in range(0, n, B):
            idx = np.arange(lo, lo + B)
            idx = np.where(idx < n, idx, 0)
            ids = feats["input_ids"][idx, :S]
            mask = (np.arange(S)[None] < src_len[idx, None]).astype(np.int32)
            out += decoding.generate(
                self.decoder, params, np.where(mask > 0, ids, 0), mask,
                beam_size=int(h["beam_size"]), max_new_tokens=self.max_new, end_id=end_id,
                length_penalty=float(h["length_penalty"]),
            )[: min(B, n - lo)]  # fmt: skip
        return out

    def predict(self, run, split=None):
        """(generated ids per row, the teacher-forced [nll, tokens, correct] sums or None for a
        split without targets) of `split`; None for a split without a file."""
        name = split or "dev"
        if name not in self.data.features:
            return None
        feats, examples = self.data.features[name], self.data.examples[name]
        generated = self.generate(run.params, feats)
        if not examples or examples[0].target is None:
            return generated, None
        keys = (*INPUTS, *self.targets)
        return generated, predict_all(run, feats, self.eval_batch_size, keys).sum(0)

    def rows_and_metrics(self, split, predictions):
        """(rows, metrics): the generated texts, scored when the split has targets."""
        generated, sums = predictions
        examples, tok = self.data.examples[split], self.data.tokenizer
        texts = [textgen.decode_pieces(tok, g) for g in generated]
        rows = [
            {"where": ex.where, "source": ex.source, "prediction": t}
            | ({} if ex.target is None else {"target": ex.target})
            for ex, t in zip(examples, texts, strict=True)
        ]
        values = {}
        if sums is not None:
            refs = [textgen.reference_text(tok, ex.target) for ex in examples]
            values = generation.generation_metrics(texts, refs, bool(self.head["char_level"]))
            values.pop("examples", None)
            if self.head.get("entity_scores"):
                values.update(textgen.entity_scores(texts, refs))
            nll, count, correct = sums
            values.update(loss=float(nll / max(count, 1)), token_accuracy=float(correct / count))
        return rows, values

    def collapse(self, rows, values):
        def show(text):
            return "empty" if not text else f"as the same text {text[:60]!r}"

        preds = [r["prediction"] for r in rows]
        return M.prediction_collapse(preds, "generations", "came out", None, show)


class Seq2SeqReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): JSONL
    source / target texts under the settings' keys, sources cut to leave room for the target."""

    settings: Seq2SeqSettings

    def read(self, path):
        s = self.settings
        return textgen.read_seq2seq(path, s.source_key, s.target_key, s.data_dir)

    def featurize(self, examples, data):
        return textgen.featurize_seq2seq(
            examples, data.tokenizer, data.max_seq_length, int(self.settings.max_target_length),
            reserve_target=True,
        )  # fmt: skip

    def head_fields(self, data) -> dict:
        s = self.settings
        return {
            "type": "seq2seq",
            "num_labels": 1,
            "max_target_length": int(s.max_target_length),
            "beam_size": int(s.beam_size),
            "length_penalty": float(s.length_penalty),
            "char_level": bool(s.char_level),
            "entity_scores": bool(s.entity_scores),
            "source_key": s.source_key,
            "target_key": s.target_key,
        }


def _token_nll(logits, labels):
    mask = labels >= 0
    return cross_entropy(logits, labels, mask), (jnp.argmax(logits, -1) == labels) & mask


Task = Seq2SeqTask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = Seq2SeqReader  # its data side

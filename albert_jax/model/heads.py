"""Fine-tuning heads on the ALBERT backbone, and the one registry that builds any model by name.

Each head subclasses `AlbertModel`, so a pretrained backbone's parameters drop in unchanged and only
the head's own parameters start fresh. As the reference (`run_classifier.py`): pooled output (or
each token's output) -> dropout (`classifier_dropout`, training only; separate from the encoder's
dropout) -> dense to `num_labels`, truncated-normal 0.02 kernel, zero bias.

    classifier/{kernel [H, num_labels], bias [num_labels]}

A head is described by a small JSON-able dict, stored in checkpoints and used by the converters:
`{"type": "sequence_classification", "num_labels": 3, "classifier_dropout": 0.1, ...}`; extra keys
(label names, the task's settings) ride along and are ignored here.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from albert_jax.model.albert import (
    AlbertForPreTraining,
    AlbertModel,
    AlbertOutput,
    Dense,
    MLMHead,
    dropout,
    grouped_param,
    init_params,
    normalize,
)
from albert_jax.model.config import AlbertConfig, Execution


class _ClassifierHead(AlbertModel):
    num_labels: int = 2
    classifier_dropout: float = 0.1
    per_token = False  # classify every token's output instead of the pooled [CLS] output

    def setup(self):
        super().setup()
        self.classifier = Dense(
            self.config, self.num_labels, ("hidden", None), execution=self.execution
        )

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> AlbertOutput:
        out = self.backbone(
            input_ids, token_type_ids, attention_mask, deterministic, output_hidden_states
        )
        x = out.sequence_output if self.per_token else out.pooled_output
        if not deterministic and self.classifier_dropout > 0:
            x = dropout(x, self.classifier_dropout, self.make_rng("dropout"), False)
        return out.replace(logits=self.classifier(x).astype(jnp.float32))


class AlbertForSequenceClassification(_ClassifierHead):
    """Pooled [CLS] output -> dropout -> dense: logits [B, num_labels] (1 label: regression)."""


class AlbertForTokenClassification(_ClassifierHead):
    """Every token's output -> dropout -> dense: logits [B, T, num_labels]."""

    per_token = True


class AlbertForQuestionAnswering(_ClassifierHead):
    """Every token's output -> dense to 2: start and end logits [B, T, 2] (transformers'
    `qa_outputs` layout; no dropout there by default, as transformers)."""

    per_token = True
    num_labels: int = 2
    classifier_dropout: float = 0.0


class AlbertForMultipleChoice(_ClassifierHead):
    """Options as sequences [..., C, T] -> pooled output -> dropout -> dense to 1: one score per
    option, logits [..., C] (transformers' layout: classifier/{kernel [H, 1], bias [1]})."""

    num_labels: int = 1

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> AlbertOutput:
        lead, T = input_ids.shape[:-1], input_ids.shape[-1]

        def flat(x):  # the encoder sees every option as a sequence of its own
            return None if x is None else x.reshape(-1, T)

        out = super().__call__(
            flat(input_ids), flat(token_type_ids), flat(attention_mask), deterministic,
            output_hidden_states,
        )  # fmt: skip
        return out.replace(logits=out.logits.reshape(lead))


def prefix_lm_mask(token_type_ids, attention_mask):
    """UniLM's mask [B, T, T]: with c the running count of segment-1 tokens, query i sees key j
    iff c[j] <= c[i] (and j is no padding): segment 0 (the source) sees itself only; each
    segment-1 token sees the source and segment 1 up to itself."""
    c = jnp.cumsum(token_type_ids, axis=-1)
    return (c[:, None, :] <= c[:, :, None]) & (attention_mask[:, None, :] > 0)


class AlbertForSeq2Seq(AlbertModel):
    """UniLM seq2seq on the bidirectional encoder: `[CLS] source [SEP] target [SEP]` under the
    prefix-LM mask, logits [B, T, V] for the next token through the pretraining MLM head (tied to
    the word table; it keeps its path `mlm/`, so a pretrained one is loaded, not started fresh).
    `decode_step` runs new tokens against a key/value cache (`albert_jax.model.decoding`)."""

    num_labels: int = 1  # unused: the vocabulary is the output
    classifier_dropout: float = 0.0

    def setup(self):
        super().setup()
        self.mlm = MLMHead(self.config, self.execution)

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
        positions=None,
    ) -> AlbertOutput:
        """`positions` [B, P]: logits only there ([B, P, V]; the loss needs the target's)."""
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = jnp.ones_like(input_ids)
        mask = prefix_lm_mask(token_type_ids, attention_mask)
        out = self.backbone(input_ids, token_type_ids, mask, deterministic, output_hidden_states)
        x = out.sequence_output
        if positions is not None:
            x = jnp.take_along_axis(x, positions[..., None].astype(jnp.int32), axis=1)
        return out.replace(logits=self.mlm(x, self.embeddings.attend))

    def decode_step(self, input_ids, token_type_ids, position_ids, key_mask, cache, at=None):
        """Logits for tokens at explicit positions. With `cache` (see `Encoder`) the tokens are
        written at slot `cache[2]`.. and `key_mask` [B, T, S] says which slots each one sees;
        without, `key_mask` [B, T, T] is the whole mask. `at` [B]: only that position's logits
        ([B, V] instead of [B, T, V]). Returns (logits, the updated cache or None)."""
        out = self.backbone(
            input_ids, token_type_ids, key_mask, True, False, position_ids, cache
        )  # fmt: skip
        x = out.sequence_output
        if at is not None:
            x = jnp.take_along_axis(x, at[:, None, None], axis=1)[:, 0]
        return self.mlm(x, self.embeddings.attend), out.hidden_states


class ConditionalLayerNorm(nn.Module):
    """LayerNorm whose scale and shift get offsets computed from a condition (bert4keras'
    conditional LayerNorm): norm(x) * (scale + cond @ W_scale) + (bias + cond @ W_shift).

        scale [H], bias [H], condition [C, 2H] (W_scale then W_shift; zero at init, no bias)

    The offsets start at zero, so at initialisation it is a plain LayerNorm. `cond` [..., C]
    broadcasts against x [..., H] once the offsets are computed."""

    config: AlbertConfig
    execution: Execution = Execution()

    @nn.compact
    def __call__(self, x, cond):
        c, d = self.config, x.shape[-1]
        zeros, ones = nn.initializers.zeros, nn.initializers.ones
        scale = grouped_param(self, "scale", ones, (d,), ("hidden",))
        bias = grouped_param(self, "bias", zeros, (d,), ("hidden",))
        w = grouped_param(self, "condition", zeros, (cond.shape[-1], 2 * d), (None, "hidden"))
        offsets = jnp.dot(cond.astype(jnp.float32), w.astype(jnp.float32))
        d_scale, d_shift = jnp.split(offsets, 2, axis=-1)
        y = normalize(x, c.layer_norm_eps)
        return (y * (scale + d_scale) + (bias + d_shift)).astype(jnp.dtype(self.execution.dtype))


class RelationHead(nn.Module):
    """The relation head's layers: subject start / end per token; conditioned on a subject's
    start and end vectors, object start / end per token and predicate."""

    config: AlbertConfig
    num_predicates: int
    execution: Execution = Execution()

    def setup(self):
        c, ex = self.config, self.execution
        self.subject = Dense(c, 2, ("hidden", None), execution=ex)
        self.norm = ConditionalLayerNorm(c, ex)
        self.object = Dense(c, 2 * self.num_predicates, ("hidden", None), execution=ex)

    def subjects(self, x):
        return self.subject(x).astype(jnp.float32)  # [B, T, 2]

    def objects(self, x, spans):
        """x [B, T, H], subject spans [B, 2] or [B, K, 2] (start, end; in range) -> object
        logits [B, T, P, 2] or [B, K, T, P, 2]."""
        one = spans.ndim == 2
        spans = spans[:, None] if one else spans
        (B, K, _), (T, H) = spans.shape, x.shape[1:]
        ends = jnp.take_along_axis(x, spans.reshape(B, 2 * K, 1).astype(jnp.int32), axis=1)
        cond = ends.reshape(B, K, 1, 2 * H)  # [start vector, end vector] per subject
        y = self.object(self.norm(x[:, None], cond))  # [B, K, T, 2P]
        logits = y.astype(jnp.float32).reshape(B, K, T, self.num_predicates, 2)
        return logits[:, 0] if one else logits


class AlbertForRelationExtraction(AlbertModel):
    """bert4keras' "half-pointer half-tagging" relation extraction. Sequence output -> dropout
    -> subject logits [B, T, 2] (start, end); for the given `subject_spans` ([B, 2], or [B, K, 2]
    candidates) the sequence under a LayerNorm conditioned on each subject's start and end vectors
    -> object logits [B, T, P, 2] (or [B, K, T, P, 2]), P = num_labels predicates. logits is
    {"subject", "object"} ("object" only with spans). Every head parameter is under
    `classifier/` (subject/, norm/, object/), so `^classifier/` regexes cover it."""

    num_labels: int = 1
    classifier_dropout: float = 0.1

    def setup(self):
        super().setup()
        self.classifier = RelationHead(self.config, self.num_labels, self.execution)

    def __call__(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        deterministic: bool = True,
        output_hidden_states: bool = False,
        subject_spans=None,
    ) -> AlbertOutput:
        out = self.backbone(
            input_ids, token_type_ids, attention_mask, deterministic, output_hidden_states
        )
        x = out.sequence_output
        if not deterministic and self.classifier_dropout > 0:
            x = dropout(x, self.classifier_dropout, self.make_rng("dropout"), False)
        logits = {"subject": self.classifier.subjects(x)}
        if subject_spans is None and self.is_initializing():  # create the object layers too
            subject_spans = jnp.zeros((x.shape[0], 2), jnp.int32)
        if subject_spans is not None:
            logits["object"] = self.classifier.objects(x, subject_spans)
        return out.replace(logits=logits)

    def object_logits(self, sequence_output, subject_spans):
        """The object logits alone, from a sequence output (evaluation: the backbone runs once,
        then the subjects decoded from its output are the candidates)."""
        return self.classifier.objects(sequence_output, subject_spans)


MODELS = {
    "pretraining": AlbertForPreTraining,
    "sequence_classification": AlbertForSequenceClassification,
    "token_classification": AlbertForTokenClassification,
    "question_answering": AlbertForQuestionAnswering,
    "multiple_choice": AlbertForMultipleChoice,
    "seq2seq": AlbertForSeq2Seq,
    "relation_extraction": AlbertForRelationExtraction,
}
HEAD_PATHS = ("mlm", "sop", "classifier")  # top-level parameter names that belong to heads


def build_model(
    config: AlbertConfig,
    head: dict[str, Any] | None = None,
    execution: Execution = Execution(),  # noqa: B008 (frozen: one shared default is safe)
) -> nn.Module:
    """The model a head dict describes (None: the pretraining model), run as `execution` says."""
    head = head or {"type": "pretraining"}
    kind = head.get("type")
    if kind not in MODELS:
        raise ValueError(f"unknown head type {kind!r}: expected one of {sorted(MODELS)}")
    if kind == "pretraining":
        return AlbertForPreTraining(config, execution)
    num_labels = head.get("num_labels")
    if not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"head {kind!r} needs num_labels >= 1, got {num_labels!r}")
    cls = MODELS[kind]
    dropout = float(head.get("classifier_dropout", cls.classifier_dropout))
    return cls(config, execution, num_labels=num_labels, classifier_dropout=dropout)


def param_shapes(config: AlbertConfig, head: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parameter tree of `build_model(config, head)` as ShapeDtypeStructs (nothing computed)."""
    model = build_model(config, head)
    return jax.eval_shape(lambda: init_params(model, jax.random.key(0), seq_len=1))

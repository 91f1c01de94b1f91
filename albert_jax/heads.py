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

from albert_jax.config import AlbertConfig
from albert_jax.model import AlbertForPreTraining, AlbertModel, AlbertOutput, Dense, dropout


class _ClassifierHead(AlbertModel):
    num_labels: int = 2
    classifier_dropout: float = 0.1
    per_token = False  # classify every token's output instead of the pooled [CLS] output

    def setup(self):
        super().setup()
        self.classifier = Dense(self.config, self.num_labels, ("hidden", None))

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


MODELS = {
    "pretraining": AlbertForPreTraining,
    "sequence_classification": AlbertForSequenceClassification,
    "token_classification": AlbertForTokenClassification,
    "question_answering": AlbertForQuestionAnswering,
    "multiple_choice": AlbertForMultipleChoice,
}
HEAD_PATHS = ("mlm", "sop", "classifier")  # top-level parameter names that belong to heads


def build_model(config: AlbertConfig, head: dict[str, Any] | None = None) -> nn.Module:
    """The model a head dict describes (None: the pretraining model)."""
    head = head or {"type": "pretraining"}
    kind = head.get("type")
    if kind not in MODELS:
        raise ValueError(f"unknown head type {kind!r}: expected one of {sorted(MODELS)}")
    if kind == "pretraining":
        return AlbertForPreTraining(config)
    num_labels = head.get("num_labels")
    if not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"head {kind!r} needs num_labels >= 1, got {num_labels!r}")
    cls = MODELS[kind]
    dropout = float(head.get("classifier_dropout", cls.classifier_dropout))
    return cls(config, num_labels=num_labels, classifier_dropout=dropout)


def param_shapes(config: AlbertConfig, head: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parameter tree of `build_model(config, head)` as ShapeDtypeStructs (nothing computed)."""
    from albert_jax.model import init_params

    model = build_model(config, head)
    return jax.eval_shape(lambda: init_params(model, jax.random.PRNGKey(0), seq_len=1))

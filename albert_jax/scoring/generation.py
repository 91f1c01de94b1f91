"""Scores of generated texts against their references (seq2seq fine-tuning, the generation
baselines): SQuAD-normalised exact match and F1, BLEU (sacrebleu) and ROUGE-L (rouge-score)."""

from __future__ import annotations

from collections.abc import Sequence

from albert_jax.scoring import squad


class CharTokenizer:
    """rouge-score tokenizer for Chinese: lower-cased, punctuation dropped, each CJK character a
    token and other non-space runs (Latin words, numbers) whole, as CMRC's character F1."""

    def tokenize(self, text: str) -> list[str]:
        return squad._MIXED_TOKENS.findall(text.lower().translate(squad._PUNCT_TABLE))


def generation_metrics(
    predictions: Sequence[str], references: Sequence[str], char_level: bool = True
) -> dict:
    """Scores (0-100) of generated texts against one reference each.

    * ``exact_match`` / ``f1``: SQuAD-normalised (lower case, no punctuation or articles) exact
      match and token F1, per example then averaged; ``char_level`` splits CJK characters (CMRC).
    * ``exact_match_strict``: the texts equal up to whitespace (punctuation counts, which matters
      for structured targets such as the entity lists).
    * ``bleu``: sacrebleu corpus BLEU, ``tokenize="zh"`` with ``char_level`` else ``"13a"``.
    * ``rouge_l``: rouge-score's ROUGE-L F-measure averaged over examples, with ``CharTokenizer``
      for ``char_level`` else rouge-score's own tokenizer; two texts without any token score 1.
    """
    import sacrebleu
    from rouge_score import rouge_scorer, tokenizers

    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if not predictions:
        raise ValueError("generation_metrics: no examples")
    n = len(predictions)
    pairs = list(zip(predictions, references, strict=True))
    tokenizer = CharTokenizer() if char_level else tokenizers.DefaultTokenizer(use_stemmer=False)
    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=tokenizer)
    rouge = 0.0
    for p, r in pairs:
        empty = not tokenizer.tokenize(p) and not tokenizer.tokenize(r)
        rouge += 1.0 if empty else scorer.score(r, p)["rougeL"].fmeasure  # (target, prediction)
    bleu_tokenize = "zh" if char_level else "13a"
    bleu = sacrebleu.corpus_bleu(list(predictions), [list(references)], tokenize=bleu_tokenize)
    squash = (lambda s: "".join(s.split())) if char_level else (lambda s: " ".join(s.split()))
    return {
        "exact_match": 100.0 * sum(squad.exact_match(p, [r]) for p, r in pairs) / n,
        "exact_match_strict": 100.0 * sum(squash(p) == squash(r) for p, r in pairs) / n,
        "f1": 100.0 * sum(squad.f1_score(p, [r], char_level) for p, r in pairs) / n,
        "bleu": float(bleu.score),
        "rouge_l": 100.0 * rouge / n,
        "examples": n,
    }

"""Non-neural baselines on the offline datasets, printed beside every neural result (`python -m
finetune.baseline NAME`): character TF-IDF + logistic regression (sentiment and the
classification suite: headlines, library, poems, hsk, genre), the most frequent tag per word
(seg), a train-entity dictionary with longest match (ner, entities), remembered train triples
(relations), and each split's majority class."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Sequence

from albert_jax.data.finetuning import records as data
from albert_jax.data.finetuning import textgen
from albert_jax.experiments.datasets import bio_spans
from albert_jax.experiments.people_daily import SPLITS
from albert_jax.scoring import generation, metrics


def baseline_tfidf(data_dir: str | os.PathLike) -> dict:
    """Character 1-2-gram TF-IDF + logistic regression, trained on train, scored on dev/test
    (any JSONL text classification: sentiment and the held-out suite)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    sets = {s: data.read_examples(os.path.join(data_dir, f"{s}.jsonl")) for s in SPLITS}
    labels = data.label_list(sets["train"])
    vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 2))
    x_train = vectorizer.fit_transform([ex.text_a for ex in sets["train"]])
    y = {s: [labels.index(ex.label) for ex in exs] for s, exs in sets.items()}
    model = LogisticRegression(max_iter=1000).fit(x_train, y["train"])
    out, majority = {}, {}
    top = collections.Counter(y["train"]).most_common(1)[0][0]  # train's majority, always
    for split in ("dev", "test"):
        pred = model.predict(vectorizer.transform([ex.text_a for ex in sets[split]]))
        out[split] = metrics.classification_metrics(y[split], pred)
        majority[split] = metrics.classification_metrics(y[split], [top] * len(y[split]))
    return {**out, "majority_class": {"label": labels[top], **majority}}


def baseline_tagging(data_dir: str | os.PathLike, scheme: str) -> dict:
    """Tags each word (for ``seg``: character) with its most frequent tag in train (ties:
    alphabetical); unseen words get ``O`` (BIO) or ``S`` (BMES, a single-character word)."""
    sets = {s: data.read_conll(os.path.join(data_dir, f"{s}.conll")) for s in SPLITS}
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for ex in sets["train"]:
        for word, tag in zip(ex.words, ex.tags, strict=True):
            counts[word][tag] += 1
    best = {w: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for w, c in counts.items()}
    default = {"BIO": "O", "BMES": "S"}[scheme]
    out = {}
    for split in ("dev", "test"):
        gold = [ex.tags for ex in sets[split]]
        pred = [[best.get(w, default) for w in ex.words] for ex in sets[split]]
        out[split] = metrics.tagging_metrics(gold, pred, scheme)
    return out


def entity_dictionary(examples: Iterable[data.TaggedExample]) -> dict[str, str]:
    """Every BIO entity string in ``examples`` -> its most frequent type (ties: alphabetical)."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for ex in examples:
        for start, end, kind in bio_spans(ex.tags):
            counts["".join(ex.words[start:end])][kind] += 1
    return {w: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for w, c in counts.items()}


def dictionary_tagger(entities: dict[str, str]) -> Callable[[Sequence[str]], list[str]]:
    """A function from characters to BIO tags by greedy longest match, left to right: at each
    character the longest string of ``entities`` that starts there becomes an entity of its type
    and the scan resumes after it; characters no match covers get ``O``."""
    lengths = sorted({len(w) for w in entities}, reverse=True)

    def tag(chars: Sequence[str]) -> list[str]:
        text = "".join(chars)
        if len(text) != len(chars):
            raise ValueError("the dictionary tagger expects one character per position")
        tags = ["O"] * len(text)
        i = 0
        while i < len(text):
            for n in lengths:
                kind = entities.get(text[i : i + n]) if i + n <= len(text) else None
                if kind is not None:
                    tags[i : i + n] = [f"B-{kind}"] + [f"I-{kind}"] * (n - 1)
                    i += n
                    break
            else:
                i += 1
        return tags

    return tag


# Measured on dev: the 1-character entries of train are all PER, surnames standing alone (张市长's
# 张); matching them everywhere drops dev F1 from 0.850 to 0.615 (PER 0.714 -> 0.353).
NER_MIN_LENGTH = 2


def baseline_ner(data_dir: str | os.PathLike, min_length: int = NER_MIN_LENGTH) -> dict:
    """Dictionary NER: every entity string of train (with its most frequent type) is tagged
    wherever it occurs in dev/test text, greedy longest match first; entries shorter than
    ``min_length`` characters are left out. Scored as BIO entities."""
    if min_length < 1:
        raise ValueError(f"min_length must be at least 1, got {min_length}")
    sets = {s: data.read_conll(os.path.join(data_dir, f"{s}.conll")) for s in SPLITS}
    entities = entity_dictionary(sets["train"])
    tag = dictionary_tagger({w: k for w, k in entities.items() if len(w) >= min_length})
    out = {}
    for split in ("dev", "test"):
        gold = [ex.tags for ex in sets[split]]
        pred = [tag(ex.words) for ex in sets[split]]
        out[split] = metrics.tagging_metrics(gold, pred, "BIO")
    return out


def baseline_entities(data_dir: str | os.PathLike, min_length: int = NER_MIN_LENGTH) -> dict:
    """The NER dictionary baseline as generation: every entity of the train targets (with its
    most frequent type) is matched in dev/test sources, greedy longest match first, and the
    matches are written as a target; scored as the seq2seq task scores generated text."""
    kinds = {label: kind for kind, label in textgen.ENTITY_LABELS.items()}
    sets = {s: textgen.read_seq2seq(os.path.join(data_dir, f"{s}.jsonl"))[0] for s in SPLITS}
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for ex in sets["train"]:
        for label, name in textgen.parse_entities(ex.target):
            counts[name][kinds.get(label, "")] += 1
    tag = dictionary_tagger(
        {w: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]
         for w, c in counts.items() if len(w) >= min_length}
    )  # fmt: skip
    out = {}
    for split in ("dev", "test"):
        preds = []
        for ex in sets[split]:
            chars = list(ex.source)
            spans = bio_spans(tag(chars))
            preds.append(textgen.entity_target([("".join(chars[a:b]), k) for a, b, k in spans]))
        refs = [ex.target for ex in sets[split]]
        out[split] = {
            **generation.generation_metrics(preds, refs),
            **textgen.entity_scores(preds, refs),
        }
    return out


def baseline_relations(data_dir: str | os.PathLike) -> dict:
    """Remembered triples: every (subject, object) pair of the train triples, with its most
    frequent predicate (ties: alphabetical), is predicted in a dev/test text that contains both
    strings; scored by exact-triple F1 as the relation task scores (`triple_metrics`); the
    majority class (no triple) scores 0."""
    from albert_jax.tasks.relation import read_duie, triple_metrics

    sets = {s: read_duie(os.path.join(data_dir, f"{s}.jsonl"))[0] for s in SPLITS}
    counts: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter
    )
    for ex in sets["train"]:
        for t in ex.triples:
            counts[(t.subject, t.object)][t.predicate] += 1
    pairs = {k: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for k, c in counts.items()}
    out = {}
    for split in ("dev", "test"):
        gold = [ex.gold() for ex in sets[split]]
        pred = [
            {(a, p, b) for (a, b), p in pairs.items() if a != b and a in ex.text and b in ex.text}
            for ex in sets[split]
        ]
        out[split] = triple_metrics(gold, pred)
    return out


BASELINES = {
    "sentiment": baseline_tfidf,
    **dict.fromkeys(("headlines", "library", "poems", "hsk", "genre"), baseline_tfidf),
    "ner": baseline_ner,
    "entities": baseline_entities,
    "relations": baseline_relations,
    "seg": lambda d: baseline_tagging(d, "BMES"),
}

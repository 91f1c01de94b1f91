"""A tiny CLUE download in the official files' layouts (each task's folder, JSON lines with CLUE's
fields, test files with an `id` and no label; CMNLI / OCNLI rows labelled '-'; CMRC 2018 as
SQuAD-format JSON whose test questions have no answers) and tiny SQuAD v1.1 / v2.0 files, built
from the fine-tuning tests' words."""

import json

import numpy as np

from support.finetune import sentences
from support.qa import squad_file

N = {"train": 16, "dev": 9, "test": 7}
FOLDERS = {
    "afqmc": "afqmc_public", "tnews": "tnews_public", "iflytek": "iflytek_public",
    "cmnli": "cmnli_public", "ocnli": "ocnli_public", "csl": "csl_public",
    "wsc": "cluewsc2020_public", "cmrc2018": "cmrc2018_public",
}  # fmt: skip
TEST_ID = 1000  # test ids start here: they come from the file's `id`, not the row number
DASH_EVERY = 4  # CMNLI / OCNLI: every 4th train / dev row is labelled '-'
NLI = ("contradiction", "entailment", "neutral")
TNEWS = {"100": "news_story", "102": "news_entertainment", "104": "news_finance"}


def _record(task, rng, i, split):
    a, b = sentences(rng, 2)
    good = "good" in a
    test = split != "train" and split.startswith("test")
    if task == "afqmc":
        rec = {"sentence1": a, "sentence2": b, "label": str(int(good))}
    elif task == "tnews":
        label = list(TNEWS)[len(a) % 3]
        rec = {"label": label, "label_desc": TNEWS[label], "sentence": a, "keywords": b}
    elif task == "iflytek":
        label = str(len(a) % 5)
        rec = {"label": label, "label_des": f"app{label}", "sentence": a}
    elif task in ("cmnli", "ocnli"):
        label = "-" if i % DASH_EVERY == 3 else NLI[len(a) % 3 if not good else 1]
        rec = {"sentence1": a, "sentence2": b, "label": label}
        if task == "ocnli":
            rec.update(level="easy", genre="news", prem_id=f"news_{i}", id=i)
            rec.update({f"label{k}": label for k in range(5)})
    elif task == "csl":
        keywords = b.split()[:3]
        rec = {"id": i, "abst": a, "keyword": keywords, "label": str(int(good))}
    elif task == "wsc":
        words = a.split()
        text = " ".join([*words, "it", "was", *b.split()])
        noun = words[1]
        rec = {
            "target": {
                "span2_index": len(" ".join(words)) + 1, "span1_index": len(words[0]) + 1,
                "span1_text": noun, "span2_text": "it",
            },
            "idx": i, "label": "true" if good else "false", "text": text,
        }  # fmt: skip
    if test:
        rec = {k: v for k, v in rec.items() if not k.startswith("label") and k != "idx"}
        rec["id"] = TEST_ID + i
    return rec


def write_cmrc(d, rng):
    """CMRC 2018's files (SQuAD format): the test set's questions without answers. Returns the
    test question ids."""
    for split in ("train", "dev", "test"):
        squad_file(d / f"{split}.json", rng, N[split], impossible_every=0)
    doc = json.loads((d / "test.json").read_text())
    ids = []
    for article in doc["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                qa.pop("is_impossible")
                qa["id"] = f"TEST_{len(ids)}_QUERY_0"
                if len(ids) % 2:
                    qa["answers"] = []  # (an empty list reads as no answer given, too)
                else:
                    del qa["answers"]
                ids.append(qa["id"])
    (d / "test.json").write_text(json.dumps(doc, ensure_ascii=False))
    return ids


def write_clue(root, tasks=tuple(FOLDERS), seed=0):
    """CLUE_DIR with each task's folder; returns {task: {test file name: its ids}} (TNEWS and
    CLUEWSC2020 also have their 1.0 test set, test1.0.json)."""
    rng = np.random.default_rng(seed)
    made = {}
    for task in tasks:
        d = root / FOLDERS[task]
        d.mkdir(parents=True, exist_ok=True)
        if task == "cmrc2018":
            made[task] = {"test.json": write_cmrc(d, rng)}
            continue
        files = {"train.json": "train", "dev.json": "dev", "test.json": "test"}
        if task in ("tnews", "wsc"):
            files["test1.0.json"] = "test"
        made[task] = {}
        for name, split in files.items():
            recs = [_record(task, rng, i, split) for i in range(N[split])]
            lines = [json.dumps(r, ensure_ascii=False) for r in recs]
            (d / name).write_text("\n".join(lines) + "\n")
            if split == "test":
                made[task][name] = [r["id"] for r in recs]
    return made


def write_squad(root, version, seed=0):
    """SQuAD_DIR with train-VERSION.json and dev-VERSION.json (v2.0: a third unanswerable)."""
    rng = np.random.default_rng(seed)
    every = 3 if version == "v2.0" else 0
    for split, n in (("train", N["train"]), ("dev", N["dev"])):
        squad_file(root / f"{split}-{version}.json", rng, n, impossible_every=every)

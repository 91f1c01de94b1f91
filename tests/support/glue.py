"""A tiny GLUE distribution in the official files' layouts (GLUE's download script's folders and
headers: CoLA's train and dev without one, MNLI's matched and mismatched sets, test files with
an index and no label), built from the fine-tuning tests' words."""

import numpy as np

from support.finetune import sentences

# task -> (folder, train/dev header or None, test header, how a row is made)
N = {"train": 16, "dev": 9, "test": 7}


def _row(task, rng, i, split):
    a, b = sentences(rng, 2)
    good = "good" in a
    test = split.startswith("test")
    if task == "cola":
        return [str(i), a] if test else ["gj04", str(int(good)), "" if good else "*", a]
    if task == "sst2":
        return [str(i), a] if test else [a, str(int(good))]
    if task == "mrpc":
        if test:
            return [str(i), str(100 + i), str(200 + i), a, b]
        return [str(int(good)), str(100 + i), str(200 + i), a, b]
    if task == "stsb":
        meta = [str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", a, b]
        return meta if test else [*meta, f"{len(a) % 6:.3f}"]
    if task == "qqp":
        if test:
            return [str(i), a, b]
        return [str(i), str(2 * i), str(2 * i + 1), a, b, str(int(good))]
    if task == "mnli":
        meta = [str(i), str(3 * i), f"{3 * i}n", "fiction", f"( {a} )", f"( {b} )", a, b, a, b]
        if test:
            return meta
        label = ("entailment", "neutral", "contradiction")[len(a) % 3 if not good else 0]
        votes = [label] * (5 if split.startswith("dev") else 1)
        return [*meta, *votes, label]
    label = ("entailment", "not_entailment")[int(not good)]
    if task == "wnli":
        label = str(int(good))
    return [str(i), a, b] if test else [str(i), a, b, label]


HEADERS = {
    "cola": (None, "index\tsentence"),
    "sst2": ("sentence\tlabel", "index\tsentence"),
    "mrpc": (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String",
    ),
    "stsb": (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
    ),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "id\tquestion1\tquestion2"),
    "qnli": ("index\tquestion\tsentence\tlabel", "index\tquestion\tsentence"),
    "rte": ("index\tsentence1\tsentence2\tlabel", "index\tsentence1\tsentence2"),
    "wnli": ("index\tsentence1\tsentence2\tlabel", "index\tsentence1\tsentence2"),
}
_MNLI = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2"
)
FOLDERS = {
    "cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP",
    "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI",
}  # fmt: skip


def write_glue(root, tasks=tuple(FOLDERS), seed=0):
    """GLUE_DIR with each task's folder; returns {task: {file name: test rows' indices}}."""
    rng = np.random.default_rng(seed)
    made = {}
    for task in tasks:
        d = root / FOLDERS[task]
        d.mkdir(parents=True, exist_ok=True)
        if task == "mnli":
            files = {
                "train.tsv": ("train", _MNLI + "\tlabel1\tgold_label"),
                "dev_matched.tsv": ("dev", _MNLI + "".join(f"\tlabel{k}" for k in range(1, 6))
                                    + "\tgold_label"),
                "dev_mismatched.tsv": ("dev", _MNLI + "".join(f"\tlabel{k}" for k in range(1, 6))
                                       + "\tgold_label"),
                "test_matched.tsv": ("test", _MNLI),
                "test_mismatched.tsv": ("test", _MNLI),
            }  # fmt: skip
        else:
            head, test_head = HEADERS[task]
            files = {f"{s}.tsv": (s, test_head if s == "test" else head) for s in N}
        made[task] = {}
        for name, (split, header) in files.items():
            rows = [_row(task, rng, i, split) for i in range(N[split])]
            lines = ([header] if header else []) + ["\t".join(r) for r in rows]
            if task == "qqp" and split == "train":  # as GLUE's: a row with too few fields
                lines.insert(4, '"\tWas it real?\t0')
            (d / name).write_text("\n".join(lines) + "\n")
            if split == "test":
                made[task][name] = [r[0] for r in rows]
    return made

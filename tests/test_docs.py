"""README.md and docs/*.md as a reader follows them: every `python -m pretrain ...`,
`python -m finetune ...` and `python -m pretrain.sweep ...` command shown with `--config FILE`
passes overrides that FILE accepts, every link and named doc page resolves, and every config,
benchmark, test or library path and `albert_jax.*` name the pages mention exists. No training:
configs are parsed, never run."""

from __future__ import annotations

import glob
import importlib
import os
import re
import shlex

import pytest
from support.corpus import check_overrides, placeholder

from albert_jax import paths
from albert_jax.experiments import sweep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SEPARATORS = {"&&", "||", ";", "|", ">", ">>", "2>&1"}
SCRIPT = re.compile(r"albert-(pretrain|finetune)(?:-([a-z-]+))?")


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def snippets(text):
    """The code a page shows: its fenced blocks, then its inline spans (which may wrap a line)."""
    spans = re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", FENCE.sub("", text))
    return FENCE.findall(text) + [s.replace("\n", " ") for s in spans]


def commands(snippet):
    """(module, args) of each `python -m pretrain...` / `finetune...` command in a snippet, as the
    shell sees it: continuation lines joined, comments dropped, `NAME="..."` variables expanded."""
    env, found = {}, []
    for line in snippet.replace("\\\n", " ").split("\n"):
        for name, value in env.items():
            line = line.replace("${" + name + "}", value).replace("$" + name, value)
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote: prose, not a command
            continue
        if len(words) == 1 and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            name, value = words[0].split("=", 1)
            env[name] = shlex.join(shlex.split(value))
            continue
        start = 0
        for i, word in enumerate([*words, ";"]):
            if word not in SEPARATORS:
                continue
            part, start = words[start:i], i + 1
            for j in range(len(part)):
                script = SCRIPT.fullmatch(part[j])  # albert-finetune ...: the installed command
                if script:
                    job, name = script.groups()
                    module = job + ("." + name.replace("-", "_") if name else "")
                    found.append((module, part[j + 1 :]))
                if j + 2 < len(part) and part[j + 1] == "-m":
                    if os.path.basename(part[j]).startswith("python"):
                        module = part[j + 2]
                        if module.split(".")[0] in ("pretrain", "finetune"):
                            found.append((module, part[j + 3 :]))
    return found


def unbracket(arg):
    """`[--flag=V]`, an optional flag as the pages write it -> `--flag=V`."""
    if arg.startswith("["):
        arg = arg[1:]
        if arg.endswith("]") and arg.count("]") > arg.count("["):
            arg = arg[:-1]
    return arg


def flag_values(args, flag):
    """The values of `--FLAG V` and `--FLAG=V` in args."""
    return [
        v
        for i, arg in enumerate(args)
        for v in ([args[i + 1]] if arg == flag and i + 1 < len(args) else [])
        + ([arg.split("=", 1)[1]] if arg.startswith(flag + "=") else [])
    ]


def documented_commands():
    """(page, module, config file, args) of every command with `--config FILE` in the pages."""
    found = []
    for page in PAGES:
        for snippet in snippets(read(page)):
            for module, args in commands(snippet):
                args = [unbracket(a) for a in args]
                for config in flag_values(args, "--config")[:1]:
                    if not placeholder(config):
                        found.append((rel(page), module, config, args))
    return found


COMMANDS = documented_commands()


def test_the_pages_show_commands_of_every_kind():
    """The extraction itself works: the README's two commands and the docs' own are found."""
    pages = {page for page, *_ in COMMANDS}
    modules = {module for _, module, *_ in COMMANDS}
    assert {"README.md", "docs/pretraining.md", "docs/finetuning.md", "docs/sweeps.md"} <= pages
    assert {"pretrain", "finetune", "pretrain.sweep", "pretrain.prepare_data"} <= modules
    readme = [(m, c) for p, m, c, _ in COMMANDS if p == "README.md"]
    assert readme[:2] == [
        ("pretrain", "configs/pretrain/cpu_small.py"),
        ("pretrain.sweep", "configs/sweeps/quickstart.py"),
    ]


@pytest.mark.parametrize(
    "page,module,config,args",
    COMMANDS,
    ids=[f"{p}:{m}:{i}" for i, (p, m, *_) in enumerate(COMMANDS)],
)
def test_documented_commands_parse(page, module, config, args, monkeypatch):
    """A pretraining or fine-tuning command's `--config.KEY=VALUE` overrides parse against its
    config file; a sweep command's `--set SCOPE.KEY=VALUE` name fields of its configs."""
    monkeypatch.chdir(ROOT)  # the pages' paths are relative to the repository root
    shipped = os.path.join(ROOT, "albert_jax", "configs") + os.sep
    config = paths.config_file(config)  # a console script's config by name: the shipped file
    path = config.split(":", 1)[0]  # FILE:ARG passes ARG to get_config
    assert path.startswith(("configs/", shipped)), f"{page}: {config} is not a shipped config"
    assert os.path.isfile(path), f"{page}: no config {config}"
    overrides = [
        a
        for a in args
        if a.startswith("--config.") and "=" in a and not placeholder(a.split("=", 1)[1])
    ]
    if module == "pretrain.sweep":
        assert not overrides, f"{page}: pretrain.sweep takes --set KEY=VALUE, not {overrides[0]}"
        sets = [s for s in flag_values(args, "--set") if not placeholder(s.split("=", 1)[-1])]
        sweep.check(sweep.apply_sets(sweep.load(path), sets))
    else:
        try:
            check_overrides(config, overrides)
        except Exception as e:  # absl / ml_collections name the key, not the page
            pytest.fail(f"{page}: python -m {module} {shlex.join(args)}\n{type(e).__name__}: {e}")


def test_the_readme_links_every_doc_page_and_each_resolves():
    readme = read(os.path.join(ROOT, "README.md"))
    linked = set(re.findall(r"\]\((docs/[^)#\s]+\.md)\)", readme))
    assert linked == {rel(p) for p in PAGES[1:]}, "README's Documentation list and docs/ differ"
    for page in PAGES:
        here = os.path.dirname(page)
        for target in re.findall(r"\]\(([^)\s]+)\)", read(page)):
            if re.match(r"[a-z]+:|#", target):
                continue  # a URL or an anchor on the same page
            path = os.path.normpath(os.path.join(here, target.split("#")[0]))
            assert os.path.exists(path), f"{rel(page)}: broken link {target}"
        for named in re.findall(r"(?<![\w/.])docs/[\w-]+\.md", read(page)):
            assert os.path.isfile(os.path.join(ROOT, named)), f"{rel(page)}: no {named}"


def test_every_path_and_name_the_pages_mention_exists():
    """`configs/...py`, `benchmarks/...`, `tests/...` and `albert_jax/...` paths (a name in
    capitals, such as NAME.py, is a placeholder), and `albert_jax.module.attribute` names."""
    for page in PAGES:
        text = read(page)
        for path in re.findall(
            r"(?<![\w/.])(?:configs|benchmarks|tests|albert_jax)/[\w/.-]*\w", text
        ):
            if re.search(r"/[A-Z_]+(\.\w+)?$", path):
                continue
            assert os.path.exists(os.path.join(ROOT, path)), f"{rel(page)}: no {path}"
        for name in sorted(set(re.findall(r"\balbert_jax(?:\.\w+)+", text))):
            parts, obj = name.split("."), None
            for n in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    obj = importlib.import_module(".".join(parts[:n]))
                except ModuleNotFoundError:
                    continue
                for attr in parts[n:]:
                    assert hasattr(obj, attr), f"{rel(page)}: {name} ({attr} not found)"
                    obj = getattr(obj, attr)
                break
            assert obj is not None, f"{rel(page)}: {name} does not import"

"""A fine-tuning run's starting point: the checkpoint named by `config.init` with the sub-blocks
`config.unshare` names unshared, or, for the random-init control (`init='none'`), a source with
the shape of `model_from`, a tokenizer and no weights (`blank_source`: also what
`FinetuneTask.from_config` builds a task on). The checks before a run starts are the run's
(`albert_jax.jobs.start`)."""

from __future__ import annotations

from albert_jax.checkpoints.source import ConversionError, Source, describe
from albert_jax.model import presets, sharing
from albert_jax.tasks.finetune_config import FinetuneError
from albert_jax.train.workdir import load_source, read_config, read_tokenizer

UNSHARE = {"": None, "all": ("attention", "ffn"), "attention": ("attention",), "ffn": ("ffn",)}


RANDOM_INIT = "none"  # config.init: no checkpoint, every weight freshly initialized


def load_init(init: str, unshare: str = "", *, tokenizer: str = "", model_from: str = ""):
    """(Source, notes): the checkpoint at `init` with the named sub-blocks unshared. With
    `init='none'` (the random-init control) no weights are read: the Source has the shape of
    `model_from` (`random_init_source`), the tokenizer at `tokenizer` and no parameters, so the
    trainer keeps every leaf of the model's own initialization, as `fresh_params='.*'` does."""
    if not init:
        raise FinetuneError(
            "config.init is empty: name the checkpoint to fine-tune (ours, a transformers "
            "directory, a Google TF1 checkpoint or a pretraining workdir), or 'none' for random "
            "weights"
        )
    if unshare not in UNSHARE:
        raise FinetuneError(f"unshare must be one of {sorted(UNSHARE)}, got {unshare!r}")
    if init == RANDOM_INIT:
        source, notes = random_init_source(tokenizer, model_from)
    else:
        source, notes = load_source(init), []
    before = source.config.layout
    blocks = UNSHARE[unshare] or ()
    L = source.config.num_layers
    groups = {f"{b}_groups": L for b in blocks}
    if groups and source.params:
        source.params, source.config = sharing.regroup(source.params, source.config, **groups)
    elif groups:  # random weights: only the shape changes
        source.config = source.config.replace(**groups)
    notes += [f"layout {before} -> {source.config.layout}"] if groups else []
    return source, notes


def random_init_source(tokenizer: str, model_from: str):
    """(Source without parameters, notes) for `init='none'`: the model config of `model_from`
    (a checkpoint, pretraining workdir, config.json or preset: `convert.read_config`) with the
    vocabulary of the tokenizer directory `tokenizer`."""
    if not tokenizer:
        raise FinetuneError(
            "--config.init=none needs --config.tokenizer=DIR (a tokenizer directory, checkpoint "
            "or pretraining workdir, e.g. runs/cpu_small/model or runs/cpu_small/data/tokenizer):"
            " random weights come without a tokenizer"
        )
    if not model_from:
        raise FinetuneError(
            "--config.init=none needs --config.model_from=SRC for the model's shape: a "
            "checkpoint or pretraining workdir (its config only; e.g. runs/cpu_small/model), "
            f"its config.json, or a preset ({', '.join(presets.NAMES)})"
        )
    try:
        tok = read_tokenizer(tokenizer)
    except ConversionError as e:
        raise FinetuneError(f"--config.tokenizer: {e}") from e
    if tok is None:
        raise FinetuneError(f"--config.tokenizer={tokenizer}: no tokenizer there")
    return blank_source(tok, model_from, tokenizer)


def blank_source(tok, model_from: str, tokenizer: str = "given") -> tuple[Source, list[str]]:
    """(Source without parameters, notes): the model config of `model_from` (a checkpoint,
    pretraining workdir, config.json or preset: `read_config`) with the vocabulary of the
    tokenizer `tok` (named `tokenizer` in the notes)."""
    try:
        config = read_config(model_from)
    except ConversionError as e:
        raise FinetuneError(
            f"--config.model_from: {e} (expected a checkpoint, pretraining workdir, config.json "
            f"or preset: {', '.join(presets.NAMES)})"
        ) from e
    vocab = []
    if config.vocab_size != tok.vocab_size:  # the embeddings are fresh: the tokenizer decides
        vocab = [f"vocab_size {config.vocab_size} -> {tok.vocab_size} (the tokenizer's)"]
        config = config.replace(vocab_size=tok.vocab_size)
    shape = f"the shape of {model_from} ({describe(config)}), tokenizer {tokenizer}"
    notes = [f"random init (init=none): {shape}", *vocab]
    location = f"random weights (init=none, shape of {model_from})"
    return Source(config, {}, tok, RANDOM_INIT, location), notes

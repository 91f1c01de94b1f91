"""ALBERT-xxlarge on a multi-host TPU pod slice (e.g. v4-256: 128 chips, 32 hosts).

Run the same command on every host (e.g. `gcloud compute tpus tpu-vm ssh NAME --worker=all`):

  python -m pretrain --config configs/pretrain/tpu_pod.py:albert-xxlarge \\
      --workdir /mnt/shared/run --config.data.data_dir=/mnt/shared/data

`jax.distributed.initialize()` discovers the pod (no addresses needed); each host reads its own
shard of the corpus and feeds global_batch / num_hosts examples per step; parameters and optimizer
state are sharded FSDP over 16 chips within each of the data-parallel groups; all hosts write their
checkpoint shards. The global batch of 4096 runs as 4 micro-batches, 8 sequences per chip on 128
chips. Check it against the slice from any host first (the TPU compiler's figures, nothing runs):

  python -m pretrain.compile --config configs/pretrain/tpu_pod.py --topology v4-256

13.9 GiB of a v4 chip's 32 (~88 sequences per chip would fit), 0.88 s of FLOPs at the bf16 peak
and 1.3 GiB of collectives a step (docs/performance.md). On more chips lower grad_accum_steps
(`--config.grad_accum_steps=2` on 256 chips keeps 8 per chip); `--config.model.layout=none` is
the paper's not-shared model (2.4B parameters: `--topology v5e-256 --config.grad_accum_steps=2`
fits a v5e chip). Multi-slice: `--config.slices=N` ('data' spans the slices). The workdir and
data_dir must be on a filesystem every host sees. Build the corpus once beforehand with
`python -m pretrain.prepare_data`.
"""

from albert_jax.configs.pretrain import paper


def get_config(arg: str = "albert-xxlarge"):
    c = paper.get_config(arg)
    c.distributed.enabled = True
    c.mesh_shape = (-1, 16, 1)  # ('data', 'fsdp', 'tensor')
    c.grad_accum_steps = 4  # 8 sequences per chip on 128 chips (see the docstring)
    c.peak_flops_per_device = 275e12  # TPU v4 bf16
    c.checkpoint_every = 2000
    c.keep_checkpoint_every = 25000
    return c

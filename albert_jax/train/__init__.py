"""Training: one trainer for pretraining and fine-tuning (`trainer`), optimizers (`optim`: LAMB,
AdamW, per-path multipliers), device meshes (`partitioning`), metrics and logging (`metrics`), the
pretraining objectives (`pretraining`), a run's workdir read back and the reader of any starting
point (`workdir`: `load_source`), the workdir lock and crash points for fault tests."""

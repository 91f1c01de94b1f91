"""Training: one trainer for pretraining and fine-tuning (`trainer`), optimizers (`optim`: LAMB,
AdamW, per-path multipliers), device meshes (`partitioning`), metrics and logging (`metrics`), the
pretraining objectives (`pretraining`), the workdir lock and crash points for fault tests."""

"""The trainer (one for pretraining and fine-tuning), its checkpoints and metrics."""

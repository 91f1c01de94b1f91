"""Fine-tuning data: readers for TSV / CSV / JSONL / CoNLL task files and NumPy featurizers
(`records`), and text generation's rows and People's Daily entity targets (`textgen`). Each task
kind's `Reader` (`albert_jax.tasks`) reads through these."""

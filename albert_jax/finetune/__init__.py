"""The fine-tuning commands: `albert-finetune[-MODULE]` (`python -m finetune[.MODULE]` in a
checkout)."""

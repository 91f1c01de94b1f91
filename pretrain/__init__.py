"""Command-line entry points for ALBERT pretraining (tokenizer, data preparation, inspection)."""

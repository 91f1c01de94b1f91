"""The pretraining commands (tokenizer, data preparation and inspection, TPU compile, sweeps):
`albert-pretrain[-MODULE]` (in a checkout `python -m pretrain[.MODULE]`)."""

"""Fine-tuning (classification, SQuAD, RACE) on top of `albert_jax`; arrives with its issue."""

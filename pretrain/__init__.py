"""`python -m pretrain[.MODULE]` in a checkout: each module here runs albert_jax.pretrain.MODULE.

The wheel installs `albert_jax` alone; there the same commands are the console scripts
`albert-pretrain` and `albert-pretrain-MODULE` (underscores as hyphens).
"""

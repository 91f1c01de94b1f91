"""`python -m finetune[.MODULE]` in a checkout: each module here runs albert_jax.finetune.MODULE.

The wheel installs `albert_jax` alone; there the same commands are the console scripts
`albert-finetune` and `albert-finetune-MODULE` (underscores as hyphens).
"""

"""`python -m finetune` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.finetune.__main__ import entry

    entry()

"""`python -m finetune.baseline` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.finetune.baseline import entry

    entry()

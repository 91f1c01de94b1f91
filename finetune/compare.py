"""`python -m finetune.compare` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.finetune.compare import entry

    entry()

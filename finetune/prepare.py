"""`python -m finetune.prepare` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.finetune.prepare import entry

    entry()

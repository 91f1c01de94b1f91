"""`python -m finetune.predict` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.finetune.predict import entry

    entry()

"""`python -m pretrain.compile` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.pretrain.compile import entry

    entry()

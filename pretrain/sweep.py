"""`python -m pretrain.sweep` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.pretrain.sweep import entry

    entry()

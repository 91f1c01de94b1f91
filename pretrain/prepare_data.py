"""`python -m pretrain.prepare_data` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.pretrain.prepare_data import entry

    entry()

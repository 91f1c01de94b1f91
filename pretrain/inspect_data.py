"""`python -m pretrain.inspect_data` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.pretrain.inspect_data import entry

    entry()

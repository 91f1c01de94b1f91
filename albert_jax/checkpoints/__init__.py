"""Everything on disk that holds weights: our format (`checkpoint`: atomic, with tokenizer and
head), the trainer's train-state checkpointer (`train_state`, orbax), transformers and Google TF1
import / transformers export (`hf`, `tf`, `tf_checkpoint`, `common`), and `source`: the one way to
read any of them, `load_source(path) -> Source(config, params, tokenizer, head)`, and to write a
Source converted. A pretraining workdir (the trainer's output) is read one layer up, by
`albert_jax.train.workdir`, whose `load_source` (any of these or a workdir) the entry points use."""

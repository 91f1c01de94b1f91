"""Everything on disk that holds weights: our format (`checkpoint`: atomic, with tokenizer and
head), the trainer's train-state checkpointer (`train_state`, orbax), transformers and Google TF1
import / transformers export (`hf`, `tf`, `tf_checkpoint`, `common`), and `source`: the one way to
read any of them, `load_source(path) -> Source(config, params, tokenizer, head)`, which every
entry point uses."""

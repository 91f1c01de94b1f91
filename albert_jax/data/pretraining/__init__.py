"""Pretraining data: text files to a tokenized corpus (`corpus`, `parallel`), sentence pairs for
SOP / NSP (`pairs`, `pair_check`), n-gram masking (`masking`) and the grain input pipeline
(`pipeline`) with per-host shards and a checkpointable iterator. No JAX: runs in input workers."""

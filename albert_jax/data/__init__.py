"""Input data, side by side: `pretraining` (text files to a tokenized corpus, sentence pairs,
n-gram masking, the grain input pipeline) and `finetuning` (task files read and featurized). No
JAX: both run in input workers or before a run starts."""

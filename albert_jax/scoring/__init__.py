"""Scoring, in plain NumPy/Python with scikit-learn, SciPy, seqeval, sacrebleu and rouge-score:
fine-tuning metrics, collapse checks and the statistics of comparisons (`metrics`), SQuAD v2.0
scoring and span decoding (`squad`), generated text (`generation`). No model and no JAX."""

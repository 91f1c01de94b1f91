"""Fine-tuning tasks: data readers and featurizers, offline datasets, metrics."""

"""Experiments over the library: sweeps of sharing layouts and their reports (`sweep`,
`sweep_report`), and the offline fine-tuning datasets built from installed packages (`datasets`:
sentiment, NER, segmentation, cloze, choice, entities, relations)."""

"""ALBERT pretraining data: corpus building, SOP/NSP pairs, n-gram masking, grain pipeline."""

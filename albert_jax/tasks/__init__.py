"""Fine-tuning tasks behind one interface (`finetuning.FinetuneTask`): classification and
regression, tagging, extractive QA, multiple choice, seq2seq and relations, with their readers
(`data`), scoring (`metrics`, `squad`) and the run that ties a source checkpoint to a task."""

"""Fine-tuning tasks behind one interface (`finetuning`: a module per task type): classification
and regression, tagging, extractive QA, multiple choice, seq2seq and relations, with their readers
(`data`), scoring (`metrics`, `squad`) and the run (`run`) that ties a checkpoint to a task."""

"""What a fine-tuning command runs, above the tasks: a run of one or several seeds
(`run`), its learning-rate search (`lr_search`) and the checks before it starts (`start`)."""

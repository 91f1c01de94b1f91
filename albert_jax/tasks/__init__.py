"""Tasks behind the trainer's interface (`albert_jax.train.task`): pretraining (`pretraining`,
`pretrain_config`) and fine-tuning (`finetuning`: a module per task type, with its typed settings
in `finetune_config` and its starting weights in `init_source`): classification and regression,
tagging, extractive QA, multiple choice, seq2seq and relations. Their files are read by
`albert_jax.data`, scored by `albert_jax.scoring`, run by `albert_jax.jobs`."""

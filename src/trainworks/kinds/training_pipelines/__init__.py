"""TrainingPipelines: export a dataset, run a CustomJob or tuning job of their own, upload the model."""

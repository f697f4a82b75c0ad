"""HyperparameterTuningJobs: an Optuna study whose trials run as CustomJobs."""

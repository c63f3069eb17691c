"""Job configuration: every input of a job (SageMaker's config files, the environment) read and
validated once into a `TrainingConfig`, and the facts about this host gathered at the edge."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["defaults", "hostfacts", "hyperparameters", "load", "model", "secrets"]

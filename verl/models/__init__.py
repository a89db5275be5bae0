"""Model definitions and converters for the training backends (``verl.models.mcore``: megatron-core)."""

"""Model-specific code: megatron-core converters (``verl.models.mcore``), multimodal position ids, and
random-weight model folders for tests and benchmarks."""

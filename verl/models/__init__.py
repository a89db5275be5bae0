"""Model-specific code: multimodal position ids and random-weight model folders for tests and benchmarks."""

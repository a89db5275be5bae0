"""verl: reinforcement-learning post-training for large language models.

``from verl import DataProto, DataProtoFuture`` works as in verl; both are imported on first access so that
``import verl`` (and config validation) stays free of torch.
"""

__version__ = "0.1.0"

__all__ = ["DataProto", "DataProtoFuture", "__version__"]


def __getattr__(name: str):
    if name == "DataProto":
        from verl.protocol import DataProto

        return DataProto
    if name == "DataProtoFuture":
        from verl.single_controller.base.future import DataProtoFuture

        return DataProtoFuture
    raise AttributeError(f"module 'verl' has no attribute {name!r}")

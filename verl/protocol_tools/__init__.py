"""The parts of :mod:`verl.protocol` around the ``DataProto`` class, one job a module; verl users import these names
from ``verl.protocol``, which re-exports them.

- :mod:`~verl.protocol_tools.config`: the auto-padding switch (``DataProtoConfig``);
- :mod:`~verl.protocol_tools.unions`: key-wise merging of two batches' parts;
- :mod:`~verl.protocol_tools.indexing`: non-tensor columns and row indices as numpy arrays;
- :mod:`~verl.protocol_tools.rows`: key checks for joining, mini-batch row order;
- :mod:`~verl.protocol_tools.padding`: padding to a multiple of the worker count and back;
- :mod:`~verl.protocol_tools.pickling`: DataProto's pickle state;
- :mod:`~verl.protocol_tools.serialization`: tensor / TensorDict byte triples;
- :mod:`~verl.protocol_tools.batch_dims`: folding the batch dimension;
- :mod:`~verl.protocol_tools.distributed`: all-gather over a process group.
"""

from verl.protocol_tools.batch_dims import fold_batch_dim, unfold_batch_dim
from verl.protocol_tools.config import AUTO_PADDING_KEY, DataProtoConfig
from verl.protocol_tools.distributed import all_gather_data_proto
from verl.protocol_tools.serialization import (
    deserialize_single_tensor,
    deserialize_tensordict,
    serialize_single_tensor,
    serialize_tensordict,
)

__all__ = [
    "AUTO_PADDING_KEY",
    "DataProtoConfig",
    "all_gather_data_proto",
    "deserialize_single_tensor",
    "deserialize_tensordict",
    "fold_batch_dim",
    "serialize_single_tensor",
    "serialize_tensordict",
    "unfold_batch_dim",
]

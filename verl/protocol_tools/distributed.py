"""All-gather of a :class:`~verl.protocol.DataProto` over a ``torch.distributed`` process group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict

if TYPE_CHECKING:
    from verl.protocol import DataProto


def all_gather_data_proto(data: DataProto, process_group=None) -> None:
    """Replace ``data``'s rows, in place, by the rows of every rank of ``process_group`` in rank order (ranks may
    hold different numbers of rows).

    Tensors are all-gathered on the collective's device (padded to the longest rank) and moved back; non-tensors
    travel as python objects.
    """
    import torch.distributed as dist

    from verl.utils.device import current_device

    world = dist.get_world_size(group=process_group)
    local = {"rows": len(data), "non_tensor_batch": data.non_tensor_batch}
    gathered_objects: list[Any] = [None] * world
    dist.all_gather_object(gathered_objects, local, group=process_group)
    rows = [part["rows"] for part in gathered_objects]
    if data.batch is not None:
        previous = data.batch.device or torch.device("cpu")
        longest = max(rows)
        tensors = {}
        for key, tensor in data.batch.items():
            tensor = tensor.contiguous().to(current_device())
            padded = torch.zeros((longest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
            padded[: tensor.shape[0]] = tensor
            parts = [torch.empty_like(padded) for _ in range(world)]
            dist.all_gather(parts, padded, group=process_group)
            tensors[key] = torch.cat([part[:count] for part, count in zip(parts, rows)]).to(previous)
        data.batch = TensorDict(source=tensors, batch_size=[sum(rows)])
    data.non_tensor_batch = {
        key: np.concatenate([part["non_tensor_batch"][key] for part in gathered_objects], axis=0)
        for key in data.non_tensor_batch
    }

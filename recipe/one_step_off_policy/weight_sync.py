"""Broadcasting the actor's weights from the trainer pool to the rollout pool.

The actor's rank 0 and every rollout rank form one extra process group (``gloo`` on CPU, ``nccl`` on GPU) beside
each pool's own: group rank 0 is the actor, ranks ``1..R`` the rollout workers. Both sides know the tensors in
advance (names, shapes, dtypes, in the actor's order: :func:`weights_info`) and cut them into the same buckets
(:func:`plan_buckets`): consecutive tensors of one dtype up to ``bucket_bytes``, broadcast as one flat buffer, so a
step costs a few large collectives instead of one per tensor.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

DEFAULT_BUCKET_BYTES = 256 << 20
GROUP_PREFIX = "verl_weight_sync"

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "TensorInfo",
    "WeightSyncGroup",
    "free_address",
    "plan_buckets",
    "receive_weights",
    "send_weights",
    "weights_info",
]


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the broadcast: its Hugging Face name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def nbytes(self) -> int:
        return self.numel * torch.empty((), dtype=self.dtype).element_size()


def weights_info(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> list[TensorInfo]:
    """The broadcast's tensor list, in iteration order."""
    return [TensorInfo(name, tuple(tensor.shape), tensor.dtype) for name, tensor in named_tensors]


def plan_buckets(infos: list[TensorInfo], bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``infos`` per bucket: consecutive tensors of one dtype, at most ``bucket_bytes`` together (a tensor
    larger than that gets a bucket of its own). Sender and receivers compute the same plan from the same list."""
    buckets: list[list[int]] = []
    size = 0
    for index, info in enumerate(infos):
        current = buckets[-1] if buckets else None
        fits = current is not None and infos[current[0]].dtype == info.dtype and size + info.nbytes <= bucket_bytes
        if fits:
            current.append(index)
            size += info.nbytes
        else:
            buckets.append([index])
            size = info.nbytes
    return buckets


def free_address() -> tuple[str, int]:
    """This node's IP and a free TCP port, for the group's rendezvous store."""
    import ray

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        port = sock.getsockname()[1]
    return ray.util.get_node_ip_address(), port


class WeightSyncGroup:
    """A process group of ``world_size`` members outside the default one, rendezvousing at ``host:port``.

    Group rank 0 hosts the TCP store; every member must construct the group at about the same time.
    """

    def __init__(self, host: str, port: int, rank: int, world_size: int, backend: str, timeout_s: float = 600.0):
        timeout = timedelta(seconds=timeout_s)
        store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
        prefixed = dist.PrefixStore(GROUP_PREFIX, store)
        if backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self.group = dist.ProcessGroupNCCL(prefixed, rank, world_size, options)
        elif backend == "gloo":
            self.group = dist.ProcessGroupGloo(prefixed, rank, world_size, timeout)
        else:
            raise ValueError(f"weight sync backend must be 'gloo' or 'nccl', got {backend!r}")
        self._store = store  # the group reads from it for its lifetime
        self.rank = rank
        self.world_size = world_size

    def broadcast(self, tensor: torch.Tensor) -> None:
        """In-place broadcast from group rank 0."""
        options = dist.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        self.group.broadcast([tensor], options).wait()


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors]) if len(tensors) > 1 else tensors[0].reshape(-1).contiguous()


def send_weights(
    group: WeightSyncGroup | None,
    named_tensors: Iterator[tuple[str, torch.Tensor]],
    infos: list[TensorInfo],
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> int:
    """Broadcast ``named_tensors`` bucket by bucket (sender side, group rank 0); returns the bytes sent.

    Every actor rank must call this (the iterator gathers FSDP shards collectively); ranks without a group only
    walk the iterator. A tensor that does not match ``infos`` (name, shape, dtype) fails before anything is sent
    for its bucket, naming it.
    """
    buckets = plan_buckets(infos, bucket_bytes)
    sent = 0
    iterator = iter(named_tensors)
    for bucket in buckets:
        tensors = []
        for index in bucket:
            name, tensor = next(iterator)
            expected = infos[index]
            if name != expected.name or tuple(tensor.shape) != expected.shape or tensor.dtype != expected.dtype:
                raise RuntimeError(
                    f"weight sync: tensor {index} is {name} {tuple(tensor.shape)} {tensor.dtype}, the receivers "
                    f"expect {expected.name} {expected.shape} {expected.dtype}; the model changed after set-up"
                )
            tensors.append(tensor)
        if group is not None:
            flat = _flat(tensors)
            group.broadcast(flat)
            sent += flat.numel() * flat.element_size()
    for extra in iterator:
        raise RuntimeError(f"weight sync: the actor has a tensor {extra[0]!r} beyond the {len(infos)} announced")
    return sent


def receive_weights(
    group: WeightSyncGroup,
    infos: list[TensorInfo],
    device: torch.device | str,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> dict[str, torch.Tensor]:
    """Receive every tensor of ``infos`` (receiver side); returns ``{name: tensor}`` (views of the bucket buffers)."""
    received: dict[str, torch.Tensor] = {}
    for bucket in plan_buckets(infos, bucket_bytes):
        numel = sum(infos[index].numel for index in bucket)
        flat = torch.empty(numel, dtype=infos[bucket[0]].dtype, device=device)
        group.broadcast(flat)
        offset = 0
        for index in bucket:
            info = infos[index]
            received[info.name] = flat[offset : offset + info.numel].view(info.shape)
            offset += info.numel
    return received

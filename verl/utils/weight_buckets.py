"""Full weights handed out a bucket at a time: the one batching rule of the training engines' full-weight iterators
(FSDP's and Megatron's), which feed the rollout engines and the checkpoint writers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch


def in_buckets(
    pairs: Iterable[tuple[str, torch.Tensor]],
    bucket_bytes: int,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``pairs`` (each floating tensor cast to ``dtype``, each tensor moved to ``device`` when given) in
    bursts: about ``bucket_bytes`` of them are taken from ``pairs`` (gathered, for a sharded model) before any is
    yielded, so a consumer loading them sees few large batches while the extra memory stays about one bucket."""
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in pairs:
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        if device is not None:
            tensor = tensor.to(device)
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
        if size >= bucket_bytes:
            yield from bucket
            bucket, size = [], 0
    yield from bucket

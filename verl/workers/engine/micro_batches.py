"""Micro-batch plans shared by the actor and the critic: fixed-size splits or token-budget (dynamic) splits,
global token/sequence counts over data-parallel ranks, and putting outputs back in the original order.

``group`` is the data-parallel process group: ``None`` (every rank) unless sequence parallelism makes groups of
ranks hold the same rows, which must then be counted once (``UlyssesMesh.dp_group``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from verl.utils.seqlen_balancing import rearrange_micro_batches, restore_dynamic_batch


def dp_world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def all_reduce_sum(value: float | int | torch.Tensor, group=None) -> float:
    """Sum of a scalar over the ranks of ``group`` (the value itself without torch.distributed)."""
    tensor = torch.as_tensor(value, dtype=torch.float64).reshape(1).clone()
    if dp_world_size() > 1:
        from verl.utils.device import current_device

        tensor = tensor.to(current_device())
        dist.all_reduce(tensor, group=group)
    return float(tensor.item())


def token_budget(max_token_len_per_gpu: int | None, sp_size: int = 1) -> int | None:
    """Valid tokens of one micro-batch: the per-GPU budget (``*_max_token_len_per_gpu``) times the
    sequence-parallel size, since a GPU holds ``1 / sp`` of a sequence-parallel micro-batch (verl's convention)."""
    return max_token_len_per_gpu * sp_size if max_token_len_per_gpu else max_token_len_per_gpu


@dataclass
class MicroBatchPlan:
    """``micro_batches`` (TensorDicts) and, for dynamic batching, the index groups to restore order."""

    micro_batches: list
    indices: list[list[int]] | None = None

    def restore(self, outputs: torch.Tensor) -> torch.Tensor:
        """Concatenated per-micro-batch ``outputs`` back in the original row order."""
        return outputs if self.indices is None else restore_dynamic_batch(outputs, self.indices)


def plan_micro_batches(batch, micro_batch_size: int | None, use_dynamic_bsz: bool, max_token_len: int | None):
    """Split a TensorDict ``batch`` into micro-batches: by ``max_token_len`` valid tokens when
    ``use_dynamic_bsz`` (same number of micro-batches on every rank), else ``micro_batch_size`` rows."""
    if use_dynamic_bsz:
        if not max_token_len or max_token_len <= 0:
            raise ValueError(
                "use_dynamic_bsz needs a positive max token length per GPU (e.g. ppo_max_token_len_per_gpu)"
            )
        micro_batches, indices = rearrange_micro_batches(batch, max_token_len=max_token_len)
        return MicroBatchPlan(micro_batches, indices)
    if not micro_batch_size or micro_batch_size <= 0:
        raise ValueError("a positive micro batch size per GPU is needed when use_dynamic_bsz is off")
    return MicroBatchPlan(list(batch.split(micro_batch_size)))


def global_counts(response_mask: torch.Tensor, group=None) -> tuple[float, float]:
    """``(tokens, non-empty sequences)`` of ``response_mask (bs, R)`` summed over the data-parallel ``group``."""
    tokens = response_mask.sum()
    seqs = (response_mask.sum(dim=-1) > 0).sum()
    both = torch.stack([tokens.double(), seqs.double()])
    if dp_world_size() > 1:
        from verl.utils.device import current_device

        both = both.to(current_device())
        dist.all_reduce(both, group=group)
    return float(both[0]), float(both[1])

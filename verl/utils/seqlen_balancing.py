"""Balanced partitioning of sequences by length, for dynamic batch size (a token budget per micro-batch).

``get_seqlen_balanced_partitions`` splits item lengths into ``k`` groups with near-equal sums using the
Karmarkar-Karp largest differencing method (Karmarkar & Karp, 1982) or a greedy largest-first assignment.
``rearrange_micro_batches`` turns a batch into micro-batches whose valid-token count stays under a budget and
returns the index lists needed to restore the original order (``get_reverse_idx``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import torch


def karmarkar_karp(seqlen_list: Sequence[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """Largest differencing method for k-way number partitioning.

    Each item starts as a k-tuple of groups (itself in one group, the others empty). Repeatedly the two
    tuples with the largest spread (max group sum - min group sum) are merged by pairing the largest group
    of one with the smallest of the other. With ``equal_size`` items are first bundled k at a time (sorted
    by length) so every final group gets the same number of items.
    """
    items = sorted(range(len(seqlen_list)), key=lambda i: seqlen_list[i])
    heap: list[tuple[int, int, list[tuple[int, list[int]]]]] = []
    counter = 0
    if equal_size:
        if len(items) % k_partitions:
            raise ValueError(f"equal_size needs len(seqlen_list)={len(items)} divisible by k={k_partitions}")
        chunks = [items[i : i + k_partitions] for i in range(0, len(items), k_partitions)]
        seeds = [[(seqlen_list[i], [i]) for i in chunk] for chunk in chunks]
    else:
        seeds = [[(seqlen_list[i], [i])] + [(0, [])] * (k_partitions - 1) for i in items]
    for groups in seeds:
        groups = sorted(groups, key=lambda g: g[0], reverse=True)
        heapq.heappush(heap, (-(groups[0][0] - groups[-1][0]), counter, groups))
        counter += 1
    while len(heap) > 1:
        _, _, first = heapq.heappop(heap)
        _, _, second = heapq.heappop(heap)
        # largest of one with smallest of the other keeps the sums level
        merged = [(a[0] + b[0], a[1] + b[1]) for a, b in zip(first, reversed(second))]
        merged.sort(key=lambda g: g[0], reverse=True)
        heapq.heappush(heap, (-(merged[0][0] - merged[-1][0]), counter, merged))
        counter += 1
    groups = heap[0][2] if heap else [(0, [])] * k_partitions
    return [sorted(members) for _, members in groups]


def greedy_partition(seqlen_list: Sequence[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """Assign items longest first to the group with the smallest sum (respecting equal group sizes if asked)."""
    cap = len(seqlen_list) // k_partitions if equal_size else math.inf
    if equal_size and len(seqlen_list) % k_partitions:
        raise ValueError(f"equal_size needs len(seqlen_list)={len(seqlen_list)} divisible by k={k_partitions}")
    sums = [0] * k_partitions
    groups: list[list[int]] = [[] for _ in range(k_partitions)]
    for i in sorted(range(len(seqlen_list)), key=lambda i: seqlen_list[i], reverse=True):
        open_groups = [g for g in range(k_partitions) if len(groups[g]) < cap]
        target = min(open_groups, key=lambda g: (sums[g], g))
        groups[target].append(i)
        sums[target] += seqlen_list[i]
    return [sorted(g) for g in groups]


def get_seqlen_balanced_partitions(
    seqlen_list: Sequence[int], k_partitions: int, equal_size: bool, method: str = "karmarkar_karp"
) -> list[list[int]]:
    """Split indices of ``seqlen_list`` into ``k_partitions`` groups with balanced length sums.

    Every group is non-empty (raises if there are fewer items than groups). Returns sorted index lists.
    """
    methods = {"karmarkar_karp": karmarkar_karp, "greedy": greedy_partition}
    if method not in methods:
        raise ValueError(f"unknown partition method {method!r}; registered: {sorted(methods)}")
    if k_partitions < 1 or len(seqlen_list) < k_partitions:
        raise ValueError(f"cannot split {len(seqlen_list)} items into {k_partitions} non-empty partitions")
    partitions = methods[method](list(seqlen_list), k_partitions, equal_size)
    if any(len(p) == 0 for p in partitions):
        raise RuntimeError(f"balanced partitioning produced an empty group: {partitions}")
    return partitions


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def rearrange_micro_batches(
    batch,
    max_token_len: int,
    dp_group=None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
) -> tuple[list, list[list[int]]]:
    """Split ``batch`` (a TensorDict with ``attention_mask``) into micro-batches of at most ``max_token_len``
    valid tokens each, balanced by valid-token count (raises if one sequence alone is longer).

    The number of micro-batches is ``ceil(total_tokens / max_token_len)`` at least (more if balanced groups
    would overshoot the budget), raised to the max over
    ``dp_group`` when ``same_micro_num_in_dp`` (so every rank runs the same number of forward/backward
    passes), to ``min_num_micro_batch``, and rounded up to a multiple of ``num_batches_divided_by``.
    Returns ``(micro_batches, micro_batch_indices)``; ``get_reverse_idx`` of the concatenated indices
    restores the original order.
    """
    seq_lens = batch["attention_mask"].sum(dim=-1).tolist()
    max_seq_len = max(seq_lens)
    if max_token_len < max_seq_len:
        raise ValueError(
            f"max_token_len={max_token_len} is smaller than the longest sequence ({max_seq_len} tokens); "
            "raise ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu"
        )
    num_micro = max(1, ceildiv(int(sum(seq_lens)), max_token_len))
    if min_num_micro_batch is not None:
        num_micro = max(num_micro, min_num_micro_batch)
    # balanced groups can overshoot the budget: add groups until none does; ranks agree on the count each round
    while True:
        num_micro = _all_reduce_int(num_micro, "max", dp_group, same_micro_num_in_dp, batch)
        if num_batches_divided_by is not None:
            num_micro = ceildiv(num_micro, num_batches_divided_by) * num_batches_divided_by
        num_micro = min(num_micro, len(seq_lens))
        partitions = get_seqlen_balanced_partitions(seq_lens, num_micro, equal_size=False)
        fits = num_micro == len(seq_lens) or max(sum(seq_lens[i] for i in p) for p in partitions) <= max_token_len
        if _all_reduce_int(int(fits), "min", dp_group, same_micro_num_in_dp, batch):
            break
        num_micro += 1
    # longest groups first: peak memory shows up on the first micro-batch
    partitions.sort(key=lambda p: sum(seq_lens[i] for i in p), reverse=True)
    micro_batches = [batch[torch.tensor(p, dtype=torch.long)] for p in partitions]
    return micro_batches, partitions


def _all_reduce_int(value: int, op: str, dp_group, enabled: bool, batch) -> int:
    """``value`` reduced with max/min over ``dp_group`` (the value itself without torch.distributed)."""
    if not (enabled and torch.distributed.is_available() and torch.distributed.is_initialized()):
        return value
    from verl.utils.device import current_device

    tensor = torch.tensor([value], dtype=torch.int64, device=current_device())
    reduce_op = torch.distributed.ReduceOp.MAX if op == "max" else torch.distributed.ReduceOp.MIN
    torch.distributed.all_reduce(tensor, op=reduce_op, group=dp_group)
    return int(tensor.item())


def get_reverse_idx(idx_map: Sequence[int]) -> list[int]:
    """Inverse permutation: ``out[idx_map[i]] = i``."""
    reverse = [0] * len(idx_map)
    for position, original in enumerate(idx_map):
        reverse[original] = position
    return reverse


def restore_dynamic_batch(outputs: torch.Tensor, micro_batch_indices: list[list[int]]) -> torch.Tensor:
    """Reorder the concatenation of micro-batch outputs back to the original batch order."""
    flat = [i for group in micro_batch_indices for i in group]
    if len(flat) != outputs.shape[0]:
        raise ValueError(f"{outputs.shape[0]} outputs for {len(flat)} indices")
    return outputs[torch.tensor(get_reverse_idx(flat), dtype=torch.long)]


def prepare_dynamic_batch(
    data,
    max_token_len: int,
    dp_group=None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
    use_dynamic_bsz_balance: bool = True,
) -> tuple[list, list[list[int]]]:
    """A ``DataProto`` split like :func:`rearrange_micro_batches` into micro-batch DataProtos (non-tensors and a copy
    of ``meta_info`` follow their rows); returns ``(micro_batches, micro_batch_indices)`` for
    :func:`restore_dynamic_batch`. ``use_dynamic_bsz_balance`` is verl's switch for the longest-first order, which
    :func:`rearrange_micro_batches` always applies."""
    import copy

    from verl.protocol import DataProto

    tensors, partitions = rearrange_micro_batches(
        data.batch,
        max_token_len=max_token_len,
        dp_group=dp_group,
        num_batches_divided_by=num_batches_divided_by,
        same_micro_num_in_dp=same_micro_num_in_dp,
        min_num_micro_batch=min_num_micro_batch,
    )
    micro_batches = []
    for micro_tensors, indices in zip(tensors, partitions, strict=True):
        non_tensors = {key: value[indices] for key, value in data.non_tensor_batch.items()}
        micro_batches.append(
            DataProto(batch=micro_tensors, non_tensor_batch=non_tensors, meta_info=copy.deepcopy(data.meta_info))
        )
    return micro_batches, partitions


def get_group_balanced_partitions(seqlen_list: Sequence[int], uid_list: Sequence, k_partitions: int) -> list[list[int]]:
    """``k_partitions`` index lists balanced by total length, never splitting a group of consecutive samples with the
    same uid (the ``rollout.n`` responses of one prompt). Each partition gets the same number of groups; groups are
    balanced by their token count with Karmarkar-Karp. Returns sorted sample indices per partition."""
    if len(seqlen_list) != len(uid_list):
        raise ValueError(f"{len(seqlen_list)} lengths but {len(uid_list)} uids")
    groups: list[list[int]] = []
    for index, uid in enumerate(uid_list):
        if groups and uid_list[groups[-1][0]] == uid:
            groups[-1].append(index)
        else:
            groups.append([index])
    if len(groups) < k_partitions:
        raise ValueError(
            f"{len(groups)} uid groups cannot fill {k_partitions} partitions; lower the world size or raise the batch"
        )
    group_tokens = [sum(int(seqlen_list[i]) for i in group) for group in groups]
    group_partitions = get_seqlen_balanced_partitions(group_tokens, k_partitions, equal_size=True)
    return [sorted(i for g in partition for i in groups[g]) for partition in group_partitions]

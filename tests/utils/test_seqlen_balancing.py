"""Balanced partitioning and dynamic micro-batching, checked against brute force and plain invariants."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from verl.utils.seqlen_balancing import (
    get_reverse_idx,
    get_seqlen_balanced_partitions,
    rearrange_micro_batches,
    restore_dynamic_batch,
)


def best_max_sum(lengths: list[int], k: int) -> int:
    """Optimal makespan by trying every assignment (small inputs only)."""
    best = sum(lengths)
    for assignment in itertools.product(range(k), repeat=len(lengths)):
        if len(set(assignment)) < k:
            continue
        sums = [0] * k
        for length, group in zip(lengths, assignment):
            sums[group] += length
        best = min(best, max(sums))
    return best


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 50), min_size=2, max_size=7),
    st.integers(1, 3),
    st.sampled_from(["karmarkar_karp", "greedy"]),
)
def test_partitions_cover_every_index_once_and_are_near_optimal(lengths, k, method):
    k = min(k, len(lengths))
    partitions = get_seqlen_balanced_partitions(lengths, k, equal_size=False, method=method)
    assert len(partitions) == k and all(partitions)
    assert sorted(i for group in partitions for i in group) == list(range(len(lengths)))
    worst = max(sum(lengths[i] for i in group) for group in partitions)
    # both heuristics stay within 4/3 of optimal (Graham's LPT bound; KK is at least as good in practice)
    assert worst <= 4 / 3 * best_max_sum(lengths, k) + 1e-9


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=4, max_size=24), st.sampled_from([2, 4]))
def test_equal_size_partitions(lengths, k):
    lengths = lengths[: len(lengths) // k * k]
    partitions = get_seqlen_balanced_partitions(lengths, k, equal_size=True)
    assert [len(p) for p in partitions] == [len(lengths) // k] * k
    assert sorted(i for group in partitions for i in group) == list(range(len(lengths)))


def test_karmarkar_karp_hand_example():
    # {8, 7, 6, 5, 4} into 2: differencing gives sums 16 and 14 (optimal is 15/15; KK is a heuristic)
    partitions = get_seqlen_balanced_partitions([8, 7, 6, 5, 4], 2, equal_size=False)
    assert sorted(sum([8, 7, 6, 5, 4][i] for i in p) for p in partitions) == [14, 16]


def test_bad_inputs_fail_clearly():
    with pytest.raises(ValueError, match="non-empty"):
        get_seqlen_balanced_partitions([1, 2], 3, equal_size=False)
    with pytest.raises(ValueError, match="unknown partition method"):
        get_seqlen_balanced_partitions([1, 2], 1, equal_size=False, method="random")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 16), min_size=1, max_size=20), st.integers(16, 64))
def test_rearrange_respects_budget_and_restores_order(lengths, budget):
    seqlen = 16
    mask = (torch.arange(seqlen)[None, :] < torch.tensor(lengths)[:, None]).long()
    batch = TensorDict({"attention_mask": mask, "row": torch.arange(len(lengths))}, batch_size=[len(lengths)])
    micro_batches, indices = rearrange_micro_batches(batch, max_token_len=budget)
    assert all(int(mb["attention_mask"].sum()) <= budget for mb in micro_batches)
    assert len(micro_batches) >= -(-sum(lengths) // budget)
    rows = torch.cat([mb["row"] for mb in micro_batches])
    assert torch.equal(restore_dynamic_batch(rows, indices), torch.arange(len(lengths)))
    flat = [i for group in indices for i in group]
    assert [flat[j] for j in get_reverse_idx(flat)] == list(range(len(lengths)))


def test_rearrange_rejects_budget_below_longest_sequence():
    batch = TensorDict({"attention_mask": torch.ones(2, 10, dtype=torch.long)}, batch_size=[2])
    with pytest.raises(ValueError, match="ppo_max_token_len_per_gpu"):
        rearrange_micro_batches(batch, max_token_len=5)


def test_group_balanced_partitions_keep_prompt_groups_together():
    from verl.utils.seqlen_balancing import get_group_balanced_partitions

    seqlens = [10, 12, 50, 48, 5, 5, 30, 31]
    uids = ["a", "a", "b", "b", "c", "c", "d", "d"]
    partitions = get_group_balanced_partitions(seqlens, uids, 2)
    assert sorted(i for p in partitions for i in p) == list(range(8))
    for partition in partitions:
        assert len({uids[i] for i in partition}) == 2  # two whole groups each
        for i in partition:
            assert all(j in partition for j in range(8) if uids[j] == uids[i])
    totals = sorted(sum(seqlens[i] for i in p) for p in partitions)
    # group sums a=22 b=98 c=10 d=61; the best two-pair split is {a, d} = 83 vs {b, c} = 108
    assert totals == [83, 108]


def test_prepare_dynamic_batch_splits_and_restores_a_dataproto():
    from verl import DataProto
    from verl.utils.seqlen_balancing import prepare_dynamic_batch, restore_dynamic_batch

    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
    data = DataProto.from_dict(
        tensors={"attention_mask": mask, "x": torch.arange(4)},
        non_tensors={"uid": ["a", "b", "c", "d"]},
        meta_info={"temperature": 0.5},
    )
    micro, indices = prepare_dynamic_batch(data, max_token_len=5)
    assert all(int(m.batch["attention_mask"].sum()) <= 5 for m in micro)
    assert all(m.meta_info == {"temperature": 0.5} for m in micro)
    for m, idx in zip(micro, indices):
        assert m.non_tensor_batch["uid"].tolist() == [["a", "b", "c", "d"][i] for i in idx]
    restored = restore_dynamic_batch(torch.cat([m.batch["x"] for m in micro]), indices)
    assert restored.tolist() == [0, 1, 2, 3]

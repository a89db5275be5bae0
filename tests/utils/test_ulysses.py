"""Ulysses collectives on 2 gloo ranks against layouts written out by hand, and the head-split rule."""

from __future__ import annotations

import pytest
import torch

from tests.workers.engine.fsdp.distributed import run_on_ranks
from verl.utils.ulysses import head_split_error, pad_to_multiple

SP, HEADS, SEQ, DIM = 2, 4, 6, 3


def full_tensor() -> torch.Tensor:
    """``(1, heads, T, d)`` with every entry distinct."""
    return torch.arange(HEADS * SEQ * DIM, dtype=torch.float64).reshape(1, HEADS, SEQ, DIM)


def _collectives_rank(rank, world):
    import torch.distributed as dist

    from verl.utils.ulysses import gather_sequence, heads_to_sequence, local_slice, sequence_to_heads

    group = dist.new_group(list(range(world)))
    full = full_tensor()
    mine = local_slice(full, 2, group).clone().requires_grad_(True)  # (1, heads, T/sp, d): my sequence slice
    by_heads = sequence_to_heads(mine, seq_dim=2, head_dim=1, group=group)  # (1, heads/sp, T, d)
    back = heads_to_sequence(by_heads.transpose(1, 2), seq_dim=1, head_dim=2, group=group)  # (1, T/sp, heads, d)
    weights = torch.arange(by_heads.numel(), dtype=torch.float64).reshape(by_heads.shape) + 100 * rank
    (by_heads * weights).sum().backward()

    values = torch.arange(SEQ // world, dtype=torch.float64) + 10 * rank
    values.requires_grad_(True)
    gathered = gather_sequence(values, 0, group)
    (gathered * torch.arange(1.0, SEQ + 1, dtype=torch.float64)).sum().backward()
    return {
        "by_heads": by_heads.detach(),
        "back": back.detach(),
        "grad": mine.grad,
        "weights": weights,
        "gathered": gathered.detach(),
        "gather_grad": values.grad,
    }


@pytest.fixture(scope="module")
def collective_results():
    return run_on_ranks(_collectives_rank, SP)


def test_sequence_to_heads_gives_each_rank_its_heads_over_the_whole_sequence(collective_results):
    full = full_tensor()
    for rank, result in enumerate(collective_results):
        heads = slice(rank * HEADS // SP, (rank + 1) * HEADS // SP)
        torch.testing.assert_close(result["by_heads"], full[:, heads], rtol=0, atol=0)
        my_slice = slice(rank * SEQ // SP, (rank + 1) * SEQ // SP)
        torch.testing.assert_close(result["back"], full[:, :, my_slice].transpose(1, 2), rtol=0, atol=0)


def test_all_to_all_backward_routes_each_gradient_to_the_rank_that_owns_the_input(collective_results):
    # d/d(full) of sum_r <by_heads_r, weights_r>: weights_r sit on rank r's heads over the whole sequence
    grad_full = torch.zeros_like(full_tensor())
    for rank, result in enumerate(collective_results):
        grad_full[:, rank * HEADS // SP : (rank + 1) * HEADS // SP] = result["weights"]
    for rank, result in enumerate(collective_results):
        my_slice = slice(rank * SEQ // SP, (rank + 1) * SEQ // SP)
        torch.testing.assert_close(result["grad"], grad_full[:, :, my_slice], rtol=0, atol=0)


def test_gather_sequence_concatenates_and_keeps_the_own_slice_of_the_gradient(collective_results):
    expected = torch.cat([torch.arange(SEQ // SP, dtype=torch.float64) + 10 * r for r in range(SP)])
    coefficients = torch.arange(1.0, SEQ + 1, dtype=torch.float64)
    for rank, result in enumerate(collective_results):
        torch.testing.assert_close(result["gathered"], expected, rtol=0, atol=0)
        own = slice(rank * SEQ // SP, (rank + 1) * SEQ // SP)
        torch.testing.assert_close(result["gather_grad"], coefficients[own], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "sp", "ok"),
    [
        (4, 2, 2, True),  # split both
        (4, 1, 2, True),  # replicate the single KV head
        (12, 2, 4, True),  # Qwen2.5-1.5B-like: 2 KV heads replicated over 4 ranks
        (14, 2, 2, True),  # Qwen2.5-0.5B at sp=2
        (9, 3, 2, False),  # SmolLM2: 9 query heads do not split in two
        (8, 3, 2, False),  # 3 KV heads: 2 neither divides nor is a multiple
        (12, 8, 4, True),
        (12, 6, 4, False),
        (4, 2, 1, True),
    ],
)
def test_head_split_rule(heads, kv_heads, sp, ok):
    error = head_split_error(heads, kv_heads, sp, key="actor.ulysses_sequence_parallel_size")
    assert (error is None) == ok, error
    if not ok:
        assert f"actor.ulysses_sequence_parallel_size={sp}" in error


def test_pad_to_multiple():
    x = torch.arange(5)[None]
    assert pad_to_multiple(x, 2, dim=1, value=-1).tolist() == [[0, 1, 2, 3, 4, -1]]
    assert pad_to_multiple(x, 5, dim=1) is x

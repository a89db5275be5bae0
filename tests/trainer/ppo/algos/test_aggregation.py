import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trainer.ppo.algos.reference import AGG_MODES, aggregate, ragged_batch
from verl.trainer.ppo.core_algos import agg_loss

LOSS = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 9.0, 9.0, 9.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.float64)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", (1 + 2 + 3 + 5) / 4),  # 2.75
        ("seq-mean-token-sum", (6 + 5) / 2),  # 5.5; the empty row does not count
        ("seq-mean-token-mean", (2 + 5) / 2),  # 3.5
        ("seq-mean-token-sum-norm", (6 / 4 + 5 / 4) / 2),  # 1.375; L = T = 4
    ],
)
def test_hand_computed_values(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_token_sum_norm_uses_a_constant_scale_factor():
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(0.55)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_random_ragged_matches_reference(mode):
    batch = ragged_batch(seed=60)
    loss = batch.rng.normal(size=batch.mask.shape)
    assert agg_loss(torch.tensor(loss), batch.torch_mask, mode).item() == pytest.approx(
        aggregate(loss, batch.mask, mode), rel=1e-12
    )


@pytest.mark.parametrize("mode", AGG_MODES)
def test_micro_batches_with_global_counts_sum_to_whole_batch(mode):
    batch = ragged_batch(seed=61, batch_size=13)
    loss = torch.tensor(batch.rng.normal(size=batch.mask.shape))
    whole = agg_loss(loss, batch.torch_mask, mode)
    num_tokens = batch.torch_mask.sum()
    num_seqs = (batch.torch_mask.sum(-1) > 0).sum()
    # Two "ranks" with two uneven micro-batches each.
    parts = [slice(0, 2), slice(2, 7), slice(7, 8), slice(8, 13)]
    summed = sum(
        agg_loss(loss[p], batch.torch_mask[p], mode, global_num_tokens=num_tokens, global_num_seqs=num_seqs)
        for p in parts
    )
    assert summed.item() == pytest.approx(whole.item(), rel=1e-12)


def test_naive_per_micro_batch_token_mean_differs_from_global():
    """Guards the test above: averaging per-micro-batch token-means is not the whole-batch token-mean."""
    loss, mask = LOSS[:2], MASK[:2]
    naive = (agg_loss(loss[:1], mask[:1], "token-mean") + agg_loss(loss[1:], mask[1:], "token-mean")) / 2
    assert naive.item() != pytest.approx(agg_loss(loss, mask, "token-mean").item())


@pytest.mark.parametrize("mode", AGG_MODES)
def test_empty_mask_gives_zero_not_nan(mode):
    assert agg_loss(LOSS, torch.zeros_like(MASK), mode).item() == 0.0


def test_unknown_mode_lists_the_modes():
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        agg_loss(LOSS, MASK, "token-sum")


@settings(max_examples=30, deadline=None)
@given(extra=st.integers(1, 5), seed=st.integers(0, 10_000), mode=st.sampled_from(AGG_MODES))
def test_loss_unchanged_by_padding(extra, seed, mode):
    batch = ragged_batch(seed=seed, batch_size=5, length=4)
    loss = torch.tensor(batch.rng.normal(size=batch.mask.shape))
    padded_loss = torch.cat([loss, torch.randn(5, extra, dtype=torch.float64)], dim=1)
    padded_mask = torch.cat([batch.torch_mask, torch.zeros(5, extra, dtype=torch.float64)], dim=1)
    # token-sum-norm divides by a length: hold it constant, as Dr. GRPO prescribes.
    kwargs = {"loss_scale_factor": 4} if mode == "seq-mean-token-sum-norm" else {}
    assert agg_loss(padded_loss, padded_mask, mode, **kwargs).item() == pytest.approx(
        agg_loss(loss, batch.torch_mask, mode, **kwargs).item(), rel=1e-12, abs=1e-12
    )


@pytest.mark.parametrize("mode", AGG_MODES)
def test_bf16_losses_are_reduced_in_float32(mode):
    """A bf16 sum of 15000 ones is 14976; the global token count must not be rounded the same way."""
    loss = torch.ones(3, 5000, dtype=torch.bfloat16)
    mask = torch.ones(3, 5000, dtype=torch.bfloat16)
    value = agg_loss(loss, mask, mode, global_num_tokens=15001, global_num_seqs=3)
    expected = {"token-mean": 15000 / 15001, "seq-mean-token-sum": 5000.0}.get(mode, 1.0)
    assert value.dtype == torch.float32 and value.item() == pytest.approx(expected, rel=1e-6)

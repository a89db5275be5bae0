import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.reference import AGG_MODES, aggregate, ragged_batch
from verl.trainer.ppo.core_algos import compute_entropy_loss, compute_value_loss


@pytest.mark.parametrize("mode", AGG_MODES)
def test_clipped_value_loss_matches_reference(mode):
    batch = ragged_batch(seed=80)
    rng = batch.rng
    values = rng.normal(size=batch.mask.shape)
    vpreds = values + rng.normal(scale=0.8, size=values.shape)
    returns = rng.normal(size=values.shape)
    loss, clipfrac = compute_value_loss(
        torch.tensor(vpreds), torch.tensor(returns), torch.tensor(values), batch.torch_mask, 0.5, mode
    )
    per_token = np.zeros_like(values)
    clipped_count = 0
    for index in np.ndindex(values.shape):
        clipped_pred = values[index] + min(max(vpreds[index] - values[index], -0.5), 0.5)
        unclipped_loss = (vpreds[index] - returns[index]) ** 2
        clipped_loss = (clipped_pred - returns[index]) ** 2
        per_token[index] = max(unclipped_loss, clipped_loss)
        clipped_count += batch.mask[index] * (clipped_loss > unclipped_loss)
    assert loss.item() == pytest.approx(0.5 * aggregate(per_token, batch.mask, mode), rel=1e-12)
    assert clipfrac.item() == pytest.approx(clipped_count / batch.mask.sum())


def test_entropy_loss_matches_reference():
    batch = ragged_batch(seed=81, length=5)
    logits = batch.rng.normal(size=(*batch.mask.shape, 9))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    entropy = -(probs * np.log(probs)).sum(-1)
    out = compute_entropy_loss(torch.tensor(logits), batch.torch_mask, "token-mean")
    assert out.item() == pytest.approx(aggregate(entropy, batch.mask, "token-mean"), rel=1e-10)

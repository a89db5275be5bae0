import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tests.trainer.ppo.algos.reference import ragged_batch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import (
    compute_rollout_correction_and_add_to_batch,
    compute_rollout_correction_and_rejection_mask,
)


def mismatch_batch(seed, scale=0.4):
    batch = ragged_batch(seed=seed)
    rollout = np.log(batch.rng.uniform(0.05, 0.95, size=batch.mask.shape))
    old = rollout + batch.rng.normal(scale=scale, size=rollout.shape)
    return batch, old, rollout


def call(batch, old, rollout, **options):
    return compute_rollout_correction_and_rejection_mask(
        torch.tensor(old), torch.tensor(rollout), batch.torch_mask, **options
    )


def test_token_truncated_is_weights_and_metrics():
    batch, old, rollout = mismatch_batch(seed=110)
    weights, mask, metrics = call(batch, old, rollout, rollout_is="token", rollout_is_threshold=1.5)
    ratio = np.exp(old - rollout)
    expected = np.minimum(ratio, 1.5) * batch.mask
    np.testing.assert_allclose(weights.numpy(), expected, rtol=1e-12)
    assert torch.equal(mask, batch.torch_mask)
    valid = batch.mask > 0
    w = expected[valid]
    assert metrics["rollout_corr/is_weight_mean"] == pytest.approx(w.mean())
    assert metrics["rollout_corr/is_weight_max"] == pytest.approx(w.max())
    assert metrics["rollout_corr/is_ess"] == pytest.approx(w.sum() ** 2 / (len(w) * (w**2).sum()))
    assert metrics["rollout_corr/is_clipped_frac"] == pytest.approx((ratio[valid] > 1.5).mean())
    log_ratio = (old - rollout)[valid]
    assert metrics["rollout_corr/mean_abs_log_ratio"] == pytest.approx(np.abs(log_ratio).mean())
    assert metrics["rollout_corr/k3_kl"] == pytest.approx((np.exp(log_ratio) - 1 - log_ratio).mean())
    assert metrics["rollout_corr/k3_kl"] >= 0
    assert metrics["rollout_corr/kl"] == pytest.approx(-log_ratio.mean())


def test_sequence_is_weights_are_products_broadcast_over_tokens():
    batch, old, rollout = mismatch_batch(seed=111, scale=0.1)
    weights, _, _ = call(batch, old, rollout, rollout_is="sequence", rollout_is_threshold=2.0)
    for i in range(batch.mask.shape[0]):
        seq_weight = min(
            np.prod([np.exp(old[i, t] - rollout[i, t]) for t in range(batch.mask.shape[1]) if batch.mask[i, t]]), 2.0
        )
        np.testing.assert_allclose(weights[i].numpy(), seq_weight * batch.mask[i], rtol=1e-10)


def test_batch_normalized_token_weights_have_mean_one():
    batch, old, rollout = mismatch_batch(seed=112)
    weights, _, metrics = call(batch, old, rollout, rollout_is="token", rollout_is_batch_normalize=True)
    assert weights.numpy()[batch.mask > 0].mean() == pytest.approx(1.0)
    assert metrics["rollout_corr/is_weight_mean"] == pytest.approx(1.0)


@pytest.mark.parametrize("level", ["token", "sequence", "geometric"])
def test_rejection_masks(level):
    batch, old, rollout = mismatch_batch(seed=113, scale=0.3)
    weights, mask, metrics = call(batch, old, rollout, rollout_rs=level, rollout_rs_threshold=1.3)
    assert weights is None
    expected = batch.mask.copy()
    for i in range(batch.mask.shape[0]):
        valid = [t for t in range(batch.mask.shape[1]) if batch.mask[i, t]]
        ratios = [np.exp(old[i, t] - rollout[i, t]) for t in valid]
        if level == "token":
            for t, r in zip(valid, ratios):
                expected[i, t] = float(1 / 1.3 <= r <= 1.3)
        elif valid:
            statistic = np.prod(ratios) if level == "sequence" else np.exp(np.mean(np.log(ratios)))
            expected[i] *= float(1 / 1.3 <= statistic <= 1.3)
    np.testing.assert_array_equal(mask.numpy(), expected)
    assert metrics["rollout_corr/rs_masked_frac"] == pytest.approx(1 - expected.sum() / batch.mask.sum())
    assert 0 < metrics["rollout_corr/rs_masked_frac"] < 1


def test_veto_rejects_sequences_with_a_catastrophic_token():
    batch, old, rollout = mismatch_batch(seed=114, scale=0.01)
    old[3, 0] = rollout[3, 0] + np.log(1e-6)
    _, mask, metrics = call(batch, old, rollout, rollout_token_veto_threshold=1e-4)
    assert mask[3].sum() == 0 and mask[4:].sum() == batch.mask[4:].sum()
    assert metrics["rollout_corr/veto_frac"] == pytest.approx(1 / (batch.mask.sum(1) > 0).sum())


def test_bad_options_fail_with_the_config_key():
    batch, old, rollout = mismatch_batch(seed=115)
    with pytest.raises(ValueError, match="rollout_is"):
        call(batch, old, rollout, rollout_is="tokens")
    with pytest.raises(ValueError, match="rollout_rs"):
        call(batch, old, rollout, rollout_rs="geo")


def test_add_to_batch_from_omegaconf_config():
    batch, old, rollout = mismatch_batch(seed=116, scale=0.3)
    config = OmegaConf.create(
        {
            "rollout_correction": {
                "rollout_is": "token",
                "rollout_is_threshold": 2.0,
                "rollout_rs": "token",
                "rollout_rs_threshold": 1.5,
                "rollout_rs_threshold_lower": 0.5,
            }
        }
    )
    data = DataProto.from_dict(
        tensors={
            "old_log_probs": torch.tensor(old),
            "rollout_log_probs": torch.tensor(rollout),
            "response_mask": batch.torch_mask,
        }
    )
    data, metrics = compute_rollout_correction_and_add_to_batch(data, config.rollout_correction)
    ratio = np.exp(old - rollout)
    np.testing.assert_allclose(data.batch["rollout_is_weights"].numpy(), np.minimum(ratio, 2.0) * batch.mask)
    np.testing.assert_array_equal(data.batch["response_mask"].numpy(), batch.mask * ((ratio >= 0.5) & (ratio <= 1.5)))
    assert all(key.startswith("rollout_corr/") for key in metrics)


def test_add_to_batch_requires_rollout_log_probs():
    data = DataProto.from_dict(tensors={"old_log_probs": torch.zeros(1, 2), "response_mask": torch.ones(1, 2)})
    with pytest.raises(KeyError, match="calculate_log_probs"):
        compute_rollout_correction_and_add_to_batch(data, OmegaConf.create({"rollout_is": "token"}))

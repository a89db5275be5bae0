import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.reference import ragged_batch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import (
    ADV_ESTIMATOR_REGISTRY,
    AdaptiveKLController,
    AdvantageEstimator,
    FixedKLController,
    apply_kl_penalty,
    compute_advantage,
    compute_grpo_outcome_advantage,
)


def rollout_batch(seed, **extra):
    batch = ragged_batch(seed=seed)
    rng = batch.rng
    probs = rng.uniform(0.05, 0.95, size=batch.mask.shape)
    tensors = {
        "token_level_rewards": batch.torch_rewards,
        "token_level_scores": batch.torch_rewards.clone(),
        "response_mask": batch.torch_mask,
        "values": batch.torch_values,
        "reward_baselines": torch.tensor(rng.normal(size=batch.mask.shape[0])),
        "old_log_probs": torch.tensor(np.log(probs)),
        "ref_log_prob": torch.tensor(np.log(rng.uniform(0.05, 0.95, size=probs.shape))),
        "sum_pi_squared": torch.tensor(probs**2 + 0.1),
    }
    tensors.update(extra)
    return batch, DataProto.from_dict(tensors=tensors, non_tensors={"uid": batch.index})


def test_apply_kl_penalty_hand_worked():
    scores = torch.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    old = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.5, -1.0], [-1.0, -9.0]], dtype=torch.float64)
    data = DataProto.from_dict(
        tensors={"token_level_scores": scores, "response_mask": mask, "old_log_probs": old, "ref_log_prob": ref}
    )
    controller = FixedKLController(kl_coef=0.1)
    data, metrics = apply_kl_penalty(data, controller, kl_penalty="kl")
    # k1 = old - ref on valid tokens: [[0.5, -1.0], [0.5, (masked)]]
    expected = [[0.0 - 0.1 * 0.5, 1.0 + 0.1 * 1.0], [2.0 - 0.1 * 0.5, 0.0]]
    np.testing.assert_allclose(data.batch["token_level_rewards"].numpy(), expected)
    # per-sequence token-mean KL: (0.5 - 1.0) / 2 = -0.25 and 0.5; batch mean 0.125
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(0.125)
    assert metrics["actor/reward_kl_penalty_coeff"] == pytest.approx(0.1)


def test_apply_kl_penalty_updates_adaptive_controller():
    _, data = rollout_batch(seed=100)
    controller = AdaptiveKLController(init_kl_coef=0.2, target_kl=1e-6, horizon=10)
    _, metrics = apply_kl_penalty(data, controller, kl_penalty="low_var_kl")
    assert metrics["actor/reward_kl_penalty_coeff"] == pytest.approx(0.2)
    assert metrics["actor/reward_kl_penalty"] > 0
    assert controller.value == pytest.approx(0.2 * (1 + 0.2 * len(data) / 10))  # error clipped at +0.2


def test_compute_advantage_passes_each_estimator_what_it_declares():
    batch, data = rollout_batch(seed=101)
    data = compute_advantage(data, AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=False)
    expected, _ = compute_grpo_outcome_advantage(
        batch.torch_rewards, batch.torch_mask, batch.index, norm_adv_by_std_in_grpo=False
    )
    assert torch.equal(data.batch["advantages"], expected)
    assert torch.equal(data.batch["returns"], expected)


@pytest.mark.parametrize("name", sorted(e.value for e in AdvantageEstimator))
def test_every_builtin_estimator_runs_through_compute_advantage(name):
    batch, data = rollout_batch(seed=102)
    data = compute_advantage(data, name, gamma=0.99, lam=0.95)
    advantages, returns = data.batch["advantages"], data.batch["returns"]
    assert advantages.shape == returns.shape == batch.torch_mask.shape
    assert torch.isfinite(advantages).all()
    assert (advantages[batch.torch_mask == 0] == 0).all()


@pytest.mark.parametrize("name", sorted(e.value for e in AdvantageEstimator))
def test_every_builtin_estimator_is_finite_on_degenerate_batches(name):
    """Groups of one, all-equal rewards and an all-empty response mask."""
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    for mask in (torch.tensor([[1.0, 0], [1, 1], [1, 0], [0, 0]], dtype=torch.float64), torch.zeros(4, 2)):
        data = DataProto.from_dict(
            tensors={
                "token_level_rewards": rewards * mask,
                "response_mask": mask.double(),
                "values": torch.zeros(4, 2, dtype=torch.float64),
                "reward_baselines": torch.ones(4, dtype=torch.float64),
                "old_log_probs": torch.full((4, 2), -0.5, dtype=torch.float64),
                "sum_pi_squared": torch.full((4, 2), 0.4, dtype=torch.float64),
            },
            non_tensors={"uid": np.array(["same", "same", "same", "alone"], dtype=object)},
        )
        data = compute_advantage(data, name, gamma=1.0, lam=1.0)
        assert torch.isfinite(data.batch["advantages"]).all() and torch.isfinite(data.batch["returns"]).all()


def test_missing_input_fails_naming_the_key():
    batch = ragged_batch(seed=103)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": batch.torch_rewards, "response_mask": batch.torch_mask},
        non_tensors={"uid": batch.index},
    )
    with pytest.raises(KeyError, match="values"):
        compute_advantage(data, "gae", gamma=1.0, lam=1.0)
    with pytest.raises(KeyError, match="calculate_sum_pi_squared"):
        compute_advantage(data, "optimal_token_baseline")
    with pytest.raises(ValueError, match="registered"):
        compute_advantage(data, "no_such_estimator")


def test_registry_covers_the_enum():
    assert {e.value for e in AdvantageEstimator} <= set(ADV_ESTIMATOR_REGISTRY)

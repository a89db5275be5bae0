"""``core_algos`` exposes verl's public names, each the one implementation in the ``algos`` package."""

import pytest

from verl.trainer.ppo import core_algos

VERL_NAMES = [
    "compute_gae_advantage_return",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_opo_outcome_advantage",
    "compute_gpg_outcome_advantage",
    "compute_optimal_token_baseline_advantage",
    "compute_policy_loss_vanilla",
    "compute_policy_loss_gspo",
    "compute_policy_loss_sapo",
    "compute_policy_loss_gpg",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_geo_mean",
    "compute_policy_loss_cispo",
    "kl_penalty",
    "agg_loss",
    "compute_value_loss",
    "compute_entropy_loss",
    "FixedKLController",
    "AdaptiveKLController",
    "get_kl_controller",
    "register_adv_est",
    "get_adv_estimator_fn",
    "AdvantageEstimator",
    "register_policy_loss",
    "get_policy_loss_fn",
    "ADV_ESTIMATOR_REGISTRY",
    "POLICY_LOSS_REGISTRY",
    "apply_kl_penalty",
    "compute_advantage",
    "compute_rollout_correction_and_add_to_batch",
]


@pytest.mark.parametrize("name", VERL_NAMES)
def test_public_name_is_exported(name):
    assert name in core_algos.__all__ and hasattr(core_algos, name)


def test_registered_functions_are_the_exported_ones():
    assert core_algos.get_adv_estimator_fn("grpo") is core_algos.compute_grpo_outcome_advantage
    assert core_algos.get_adv_estimator_fn("gae") is core_algos.compute_gae_advantage_return
    assert core_algos.get_policy_loss_fn("vanilla") is core_algos.compute_policy_loss_vanilla
    assert core_algos.get_policy_loss_fn("geo_mean") is core_algos.compute_policy_loss_geo_mean

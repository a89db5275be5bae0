"""Which steps may take ``old_log_probs`` from the actor update instead of a separate pass (exact only on-policy
and when nothing reads them before the update), on configs composed as a user's command line would."""

from __future__ import annotations

import pytest

from verl.trainer.config.loader import compose_config
from verl.trainer.ppo.utils import old_log_probs_from_update


def _config(*overrides: str, config_name: str = "ppo_demo"):
    from verl.trainer.main_ppo import prepare_config

    return prepare_config(compose_config(list(overrides), config_name=config_name))


def test_the_demo_step_is_on_policy():
    assert old_log_probs_from_update(_config())


def test_verls_default_step_keeps_the_pass():
    # verl's defaults: 1024 prompts per step in mini-batches of 256, so four optimizer steps per batch
    assert not old_log_probs_from_update(_config(config_name="ppo_trainer"))


@pytest.mark.parametrize(
    "overrides",
    [
        ["actor_rollout_ref.actor.skip_old_log_prob_on_policy=False"],
        ["actor_rollout_ref.actor.ppo_epochs=2"],
        ["data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4"],
        ["algorithm.use_kl_in_reward=True"],
        ["actor_rollout_ref.rollout.calculate_log_probs=True"],
        ["actor_rollout_ref.rollout.calculate_log_probs=True", "algorithm.rollout_correction.rollout_is=token"],
        ["algorithm.adv_estimator=optimal_token_baseline", "actor_rollout_ref.actor.calculate_sum_pi_squared=True"],
        ["actor_rollout_ref.actor.calculate_sum_pi_squared=True"],
        ["actor_rollout_ref.actor.adaptive_entropy.enabled=True"],
    ],
    ids=[
        "switched-off",
        "two-epochs",
        "two-mini-batches",
        "kl-in-reward",
        "rollout-diagnostics",
        "rollout-is",
        "otb",
        "sum-pi-squared",
        "adaptive-entropy",
    ],
)
def test_steps_that_need_the_pass_keep_it(overrides):
    assert not old_log_probs_from_update(_config(*overrides))

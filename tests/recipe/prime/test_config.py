"""PRIME's config: the outcome reward is the verifier alone (the PRM is no score source), and keys PRIME does not use
fail at composition naming themselves."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from recipe.entry_points import compose_entry
from recipe.prime.main_prime import PrimeTaskRunner
from tests.support.models import smollm2_path
from verl.trainer.config.loader import ConfigError
from verl.trainer.main_ppo import TaskRunner
from verl.utils.reward_score import default_compute_score
from verl.workers.reward_manager.combined import CombinedReward
from verl.workers.reward_manager.naive import NaiveRewardManager

ENTRY = "recipe.prime.main_prime"


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_path())


def test_outcome_reward_is_the_verifier_alone(tokenizer):
    config = compose_entry(ENTRY, [])
    assert config.reward_model.enable  # the PRM runs
    # the PPO runner would add the reward-model group's scores to the verifier's: PRIME's must not
    assert isinstance(TaskRunner._reward_functions(config, tokenizer)[0], CombinedReward)
    for reward_fn in PrimeTaskRunner._reward_functions(config, tokenizer):
        assert type(reward_fn) is NaiveRewardManager
        assert reward_fn.compute_score is default_compute_score
    assert config.reward_model.enable  # the run's config is left as it was


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["+reward_model.combine.weights={rule:1.0,model:1.0}"], "reward_model.combine"),
        (["algorithm.use_kl_in_reward=True"], "algorithm.use_kl_in_reward"),
        (["data.accuracy_lower_bound=0.9", "data.accuracy_upper_bound=0.1"], "data.accuracy_lower_bound"),
        (["actor_rollout_ref.rollout.n=1"], "rollout.n >= 2"),
    ],
)
def test_bad_prime_settings_fail_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace("+", r"\+")):
        compose_entry(ENTRY, overrides)

import importlib.util
import sys
import textwrap

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tests.trainer.ppo.algos.reference import actor_config, aggregate, ragged_batch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import (
    ADV_ESTIMATOR_REGISTRY,
    POLICY_LOSS_REGISTRY,
    AdvantageEstimator,
    compute_advantage,
    get_adv_estimator_fn,
    get_policy_loss_fn,
    register_adv_est,
    register_policy_loss,
)

USER_MODULE = textwrap.dedent(
    '''
    """A user's algorithm file: registers an estimator and a policy loss by name."""
    import torch

    from verl.trainer.ppo.core_algos import register_adv_est, register_policy_loss, agg_loss


    @register_adv_est("user_max_baseline")
    def max_baseline(token_level_rewards, response_mask, index, **kwargs):
        """A = s - max over the group of s."""
        scores = token_level_rewards.sum(-1)
        baseline = torch.stack([scores[[j for j in range(len(index)) if index[j] == index[i]]].max()
                                for i in range(len(index))])
        advantages = (scores - baseline).unsqueeze(-1) * response_mask
        return advantages, advantages


    @register_policy_loss("user_reinforce_scaled")
    def reinforce_scaled(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean",
                         config=None, rollout_is_weights=None, global_num_tokens=None, global_num_seqs=None):
        scale = config.policy_loss.user_scale
        loss = agg_loss(-scale * advantages * log_prob, response_mask, loss_agg_mode,
                        global_num_tokens=global_num_tokens, global_num_seqs=global_num_seqs)
        return loss, {"pg_clipfrac": 0.0, "pg_clipfrac_lower": 0.0, "ppo_kl": 0.0}
    '''
)


def import_by_path(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def user_module(tmp_path):
    path = tmp_path / "my_algorithms.py"
    path.write_text(USER_MODULE)
    module = import_by_path(path, "my_algorithms")
    yield module
    ADV_ESTIMATOR_REGISTRY.pop("user_max_baseline", None)
    POLICY_LOSS_REGISTRY.pop("user_reinforce_scaled", None)
    sys.modules.pop("my_algorithms", None)


def test_every_builtin_name_is_registered():
    assert {e.value for e in AdvantageEstimator} <= set(ADV_ESTIMATOR_REGISTRY)
    assert {"vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov", "geo_mean", "cispo"} <= set(POLICY_LOSS_REGISTRY)
    assert get_adv_estimator_fn(AdvantageEstimator.GRPO) is get_adv_estimator_fn("grpo")


def test_unknown_names_fail_listing_registered_ones():
    with pytest.raises(ValueError, match=r"registered: \[.*'grpo'.*\]"):
        get_adv_estimator_fn("grpoo")
    with pytest.raises(ValueError, match=r"registered: \[.*'vanilla'.*\]"):
        get_policy_loss_fn("ppo")


def test_registering_a_different_function_under_a_taken_name_fails():
    with pytest.raises(ValueError, match="already registered"):

        @register_adv_est("grpo")
        def another_grpo(token_level_rewards, response_mask, index):
            return token_level_rewards, token_level_rewards

    with pytest.raises(ValueError, match="already registered"):

        @register_policy_loss("vanilla")
        def another_vanilla(*args, **kwargs):
            return None


def test_user_estimator_selected_by_name_from_config(user_module):
    config = OmegaConf.create({"algorithm": {"adv_estimator": "user_max_baseline", "gamma": 1.0, "lam": 1.0}})
    batch = ragged_batch(seed=90)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": batch.torch_rewards, "response_mask": batch.torch_mask},
        non_tensors={"uid": batch.index},
    )
    data = compute_advantage(
        data, config.algorithm.adv_estimator, config.algorithm.gamma, config.algorithm.lam, config=config.algorithm
    )
    scores = batch.rewards.sum(axis=1)
    expected = np.array(
        [
            scores[i] - max(scores[j] for j in range(len(scores)) if batch.index[j] == batch.index[i])
            for i in range(len(scores))
        ]
    )
    np.testing.assert_allclose(data.batch["advantages"].numpy(), expected[:, None] * batch.mask, atol=1e-12)


def test_user_policy_loss_selected_by_name_from_config(user_module):
    config = OmegaConf.create(
        {"actor": {"clip_ratio": 0.2, "policy_loss": {"loss_mode": "user_reinforce_scaled", "user_scale": 3.0}}}
    )
    batch = ragged_batch(seed=91)
    log_prob = np.log(batch.rng.uniform(0.1, 1.0, size=batch.mask.shape))
    adv = batch.rng.normal(size=batch.mask.shape)
    loss_fn = get_policy_loss_fn(config.actor.policy_loss.loss_mode)
    loss, metrics = loss_fn(
        torch.tensor(log_prob),
        torch.tensor(log_prob),
        torch.tensor(adv),
        batch.torch_mask,
        "seq-mean-token-mean",
        config.actor,
    )
    assert loss.item() == pytest.approx(aggregate(-3.0 * adv * log_prob, batch.mask, "seq-mean-token-mean"))
    assert metrics["ppo_kl"] == 0.0


def test_builtin_losses_read_an_omegaconf_actor_config():
    config = OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": None,
            "clip_ratio_high": 0.3,
            "clip_ratio_c": 3.0,
            "policy_loss": {"loss_mode": "clip_cov", "clip_cov_ratio": 0.0002, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0},
        }
    )
    zeros = torch.zeros(2, 3, dtype=torch.float64)
    for name in sorted(POLICY_LOSS_REGISTRY):
        loss, _ = get_policy_loss_fn(name)(zeros, zeros, torch.ones_like(zeros), torch.ones_like(zeros), config=config)
        assert torch.isfinite(loss), name
    assert actor_config().clip_ratio == 0.2

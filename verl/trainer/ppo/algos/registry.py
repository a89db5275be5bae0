"""Name -> function registries for advantage estimators and policy losses.

These are the only dispatch path: the trainer and the actor look a name from the config up here
and never special-case one. Users add their own with the decorators::

    @register_adv_est("my_estimator")
    def my_estimator(token_level_rewards, response_mask, index, **kwargs): ...

    @register_policy_loss("my_loss")
    def my_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, ...): ...

Built-in entries live in ``verl.trainer.ppo.algos.advantage`` / ``.policy_loss`` and are imported on first lookup
(:class:`verl.utils.registry.Registry`), so config validation checks a name without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from verl.utils.registry import Registry


class AdvantageEstimator(str, Enum):
    """Names of the built-in advantage estimators (``algorithm.adv_estimator``).

    Custom estimators need no entry here: register them by string name with :func:`register_adv_est`.
    """

    GAE = "gae"
    GRPO = "grpo"
    GRPO_PASSK = "grpo_passk"
    GRPO_VECTORIZED = "grpo_vectorized"
    RLOO = "rloo"
    RLOO_VECTORIZED = "rloo_vectorized"
    REINFORCE_PLUS_PLUS = "reinforce_plus_plus"
    REINFORCE_PLUS_PLUS_BASELINE = "reinforce_plus_plus_baseline"
    REMAX = "remax"
    OPO = "opo"
    GPG = "gpg"
    OPTIMAL_TOKEN_BASELINE = "optimal_token_baseline"


ADV_ESTIMATOR_REGISTRY: Registry[Callable[..., Any]] = Registry(
    "advantage estimator", "algorithm.adv_estimator", package="verl.trainer.ppo.algos", decorator="register_adv_est"
)
POLICY_LOSS_REGISTRY: Registry[Callable[..., Any]] = Registry(
    "policy loss",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
    package="verl.trainer.ppo.algos",
    decorator="register_policy_loss",
)


def register_adv_est(name_or_enum: str | AdvantageEstimator, **info: Any) -> Callable[[Callable[..., Any]], Callable]:
    """Decorator registering an advantage estimator under ``name_or_enum``.

    The estimator declares its inputs by its parameter names; :func:`compute_advantage` passes those it
    names (``token_level_rewards``, ``response_mask``, ``index``, ``values``, ``reward_baselines``,
    ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``, ``config``, ``old_log_probs``, ``sum_pi_squared``,
    ``rollout_is_weights``), or all of them when it takes ``**kwargs``. It returns
    ``(advantages (bs, T), returns (bs, T))``. ``info``: ``group_baseline=True`` marks an estimator whose
    baseline is the other responses of the same prompt (it needs ``actor_rollout_ref.rollout.n > 1``).
    """
    return ADV_ESTIMATOR_REGISTRY.register(name_or_enum, **info)


def get_adv_estimator_fn(name_or_enum: str | AdvantageEstimator) -> Callable[..., Any]:
    """The estimator registered under ``name_or_enum``; unknown names fail listing the registered ones."""
    return ADV_ESTIMATOR_REGISTRY.get(name_or_enum)


def register_policy_loss(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a policy loss ``fn(old_log_prob, log_prob, advantages, response_mask,
    loss_agg_mode="token-mean", config=None, rollout_is_weights=None, global_num_tokens=None,
    global_num_seqs=None) -> (pg_loss, metrics)``."""
    return POLICY_LOSS_REGISTRY.register(name)


def get_policy_loss_fn(name: str) -> Callable[..., Any]:
    """The policy loss registered under ``name``; unknown names fail listing the registered ones."""
    return POLICY_LOSS_REGISTRY.get(name)

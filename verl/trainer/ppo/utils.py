"""Roles of the worker groups, and which roles a config needs.

Whether a run needs a critic, a reference policy or a greedy baseline rollout follows from the config and
from the inputs the registered advantage estimator declares (its parameter names), never from a
hard-coded list of algorithm names.
"""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

__all__ = ["Role", "estimator_inputs", "need_critic", "need_reference_policy", "need_reward_baselines"]


class Role(Enum):
    """What a worker group does (verl's names)."""

    Actor = 0
    Rollout = 1
    ActorRollout = 2
    Critic = 3
    RefPolicy = 4
    RewardModel = 5
    ActorRolloutRef = 6


def estimator_inputs(adv_estimator: Any) -> set[str]:
    """Parameter names of the registered advantage estimator (all known inputs when it takes ``**kwargs``)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    parameters = inspect.signature(get_adv_estimator_fn(adv_estimator)).parameters
    return {name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}


def need_critic(config: Any) -> bool:
    """``critic.enable`` when set; otherwise whether the advantage estimator takes ``values`` (GAE does)."""
    enable = getattr(getattr(config, "critic", None), "enable", None)
    if enable is not None:
        return bool(enable)
    return "values" in estimator_inputs(config.algorithm.adv_estimator)


def need_reference_policy(config: Any) -> bool:
    """A reference policy is needed for the KL penalty, in the reward or as a loss term."""
    return bool(config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss)


def need_reward_baselines(config: Any) -> bool:
    """Whether the estimator takes ``reward_baselines`` (ReMax): the reward of a greedy rollout per prompt."""
    return "reward_baselines" in estimator_inputs(config.algorithm.adv_estimator)

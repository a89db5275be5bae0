"""Roles of the worker groups, and which roles a config needs.

Whether a run needs a critic, a reference policy or a greedy baseline rollout follows from the config and
from the inputs the registered advantage estimator declares (its parameter names), never from a
hard-coded list of algorithm names.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verl.trainer.config.root import PPOConfig

__all__ = [
    "Role",
    "estimator_inputs",
    "estimator_needs_groups",
    "need_critic",
    "need_reference_policy",
    "need_reward_baselines",
    "old_log_probs_from_update",
]


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
    """Parameter names of the registered advantage estimator (``**kwargs`` excluded), read from its source for a
    built-in one (no import) and from its signature for one registered at run time."""
    from verl.trainer.ppo.algos.registry import ADV_ESTIMATOR_REGISTRY

    params = ADV_ESTIMATOR_REGISTRY.params(adv_estimator)
    if params is None:  # unknown name: the lookup fails listing the registered ones
        ADV_ESTIMATOR_REGISTRY.get(adv_estimator)
        return set()
    return set(params)


def estimator_needs_groups(adv_estimator: Any) -> bool:
    """Whether the estimator's baseline is the other responses of the same prompt (registered with
    ``group_baseline=True``): it needs ``actor_rollout_ref.rollout.n > 1``."""
    from verl.trainer.ppo.algos.registry import ADV_ESTIMATOR_REGISTRY

    return bool(ADV_ESTIMATOR_REGISTRY.info(adv_estimator).get("group_baseline", False))


def need_critic(config: Any) -> bool:
    """``critic.enable`` when set; otherwise whether the advantage estimator takes ``values`` (GAE does)."""
    if config.critic.enable is not None:
        return bool(config.critic.enable)
    return "values" in estimator_inputs(config.algorithm.adv_estimator)


def need_reference_policy(config: Any) -> bool:
    """A reference policy is needed for the KL penalty, in the reward or as a loss term."""
    return bool(config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss)


def need_reward_baselines(config: Any) -> bool:
    """Whether the estimator takes ``reward_baselines`` (ReMax): the reward of a greedy rollout per prompt."""
    return "reward_baselines" in estimator_inputs(config.algorithm.adv_estimator)


def old_log_probs_from_update(config: PPOConfig) -> bool:
    """Whether a step may skip its ``compute_log_prob`` pass and let the actor update take ``old_log_probs`` from
    its own forward pass (detached), with ``actor.skip_old_log_prob_on_policy`` on.

    Exact when the step is on-policy — one epoch (``ppo_epochs=1``) over one mini-batch
    (``ppo_mini_batch_size == data.train_batch_size``): the update's forward runs the policy that generated the
    batch, before its only optimizer step, so its log-probs are π_old's. Not allowed when something reads
    ``old_log_probs`` before the update: the KL penalty in the reward (``algorithm.use_kl_in_reward``), rollout
    correction (``algorithm.rollout_correction`` importance weights, rejection, veto or bypass), the rollout-vs-
    training log-prob diagnostics a user asks for with ``rollout.calculate_log_probs``, an advantage estimator
    that takes them, ``actor.calculate_sum_pi_squared`` (computed in that pass) or ``actor.adaptive_entropy`` (its
    coefficient follows that pass's entropy).
    """
    actor = config.actor_rollout_ref.actor
    if not actor.skip_old_log_prob_on_policy:
        return False
    if int(actor.ppo_epochs) != 1 or int(actor.ppo_mini_batch_size) != int(config.data.train_batch_size):
        return False
    correction = config.algorithm.rollout_correction
    corrects = bool(
        correction.rollout_is
        or correction.rollout_rs
        or correction.rollout_token_veto_threshold
        or correction.bypass_mode
    )
    diagnostics = config.actor_rollout_ref.rollout.calculate_log_probs
    # the log-prob pass also computes sum_v pi^2 (actor.calculate_sum_pi_squared)
    sum_pi_squared = actor.calculate_sum_pi_squared
    # adaptive entropy control sets the update's coefficient from that pass's entropy
    adaptive_entropy = actor.adaptive_entropy.enabled
    if config.algorithm.use_kl_in_reward or corrects or diagnostics or sum_pi_squared or adaptive_entropy:
        return False
    return "old_log_probs" not in estimator_inputs(config.algorithm.adv_estimator)

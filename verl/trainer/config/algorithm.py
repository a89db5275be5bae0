"""Algorithm config (``algorithm``): advantage estimator, discounting, KL control, rollout correction."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, registry_field

KL_PENALTY_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full")
"""KL estimators accepted by ``core_algos.kl_penalty`` for the in-reward KL penalty."""


@dataclass
class KLControlConfig(BaseConfig):
    """Controller of the in-reward KL coefficient (``algorithm.use_kl_in_reward``)."""

    type: str = choice_field("fixed", ("fixed", "adaptive"))
    """``fixed`` keeps ``kl_coef``; ``adaptive`` steers it towards ``target_kl`` (Ziegler et al. 2019)."""

    kl_coef: float = bounded_field(0.001, ge=0.0)
    """Initial (or fixed) KL coefficient."""

    horizon: int = bounded_field(10000, gt=0)
    """Adaptive controller: steps over which the coefficient adapts."""

    target_kl: float = bounded_field(0.1, gt=0.0)
    """Adaptive controller: the KL value it steers towards."""


@dataclass
class RolloutCorrectionConfig(BaseConfig):
    """Importance-sampling correction for the mismatch between the rollout engine and the trained policy.

    Needs ``actor_rollout_ref.rollout.calculate_log_probs=True`` whenever ``rollout_is`` or ``rollout_rs`` is set.
    """

    rollout_is: str | None = choice_field(None, (None, "token", "sequence"))
    """Truncated importance weights ``pi_train / pi_rollout`` per token or per sequence; null disables them."""

    rollout_is_threshold: float = bounded_field(2.0, gt=0.0)
    """Upper truncation of the importance weights."""

    rollout_is_batch_normalize: bool = False
    """Rescale the truncated importance weights to mean 1 over the batch's valid tokens."""

    rollout_rs: str | None = choice_field(None, (None, "token", "sequence", "geometric"))
    """Rejection sampling: mask tokens/sequences whose ratio leaves the thresholds; null disables it."""

    rollout_rs_threshold: float | None = bounded_field(None, gt=0.0)
    """Upper ratio threshold of rejection sampling; null uses ``rollout_is_threshold``."""

    rollout_rs_threshold_lower: float | None = bounded_field(None, ge=0.0)
    """Lower ratio threshold of rejection sampling; null uses the reciprocal of the upper one."""

    rollout_token_veto_threshold: float | None = bounded_field(None, gt=0.0)
    """Reject a whole sequence when any token's ratio is below this value; null disables the veto."""

    bypass_mode: bool = False
    """Use the rollout log-probs as the old log-probs (skips the actor's recomputation)."""


@dataclass
class FilterGroupsConfig(BaseConfig):
    """DAPO dynamic sampling: drop prompt groups whose responses all score the same, then sample more."""

    enable: bool = False
    """Filter out groups with zero variance of ``metric``."""

    metric: str | None = choice_field(None, (None, "acc", "score", "seq_reward", "seq_final_reward"))
    """Per-sequence metric whose variance decides whether a group is kept."""

    max_num_gen_batches: int = bounded_field(0, ge=0)
    """Most generation batches per step while filling the batch; 0 means no limit."""


@dataclass
class AlgoConfig(BaseConfig):
    """The RL algorithm: how advantages are estimated and how the KL to the reference enters."""

    adv_estimator: str = registry_field("gae", "verl.trainer.ppo.algos.registry:ADV_ESTIMATOR_REGISTRY")
    """Registered advantage estimator (``core_algos.get_adv_estimator_fn``), e.g. gae (PPO with a critic, verl's
    default), grpo, rloo."""

    gamma: float = bounded_field(1.0, ge=0.0, le=1.0)
    """Discount factor of returns."""

    lam: float = bounded_field(1.0, ge=0.0, le=1.0)
    """GAE lambda (bias-variance trade-off of the advantage)."""

    norm_adv_by_std_in_grpo: bool = True
    """GRPO: divide group-centred scores by the group's standard deviation (false gives Dr. GRPO)."""

    use_kl_in_reward: bool = False
    """Subtract ``kl_coef * KL(policy || reference)`` from the token rewards (needs the reference model)."""

    kl_penalty: str = choice_field("kl", KL_PENALTY_TYPES)
    """KL estimator of the in-reward penalty."""

    kl_ctrl: KLControlConfig = field(default_factory=KLControlConfig)
    """Controller of the in-reward KL coefficient."""

    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    """Rollout/training mismatch correction."""

    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)
    """DAPO dynamic sampling."""

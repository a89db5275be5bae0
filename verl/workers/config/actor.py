"""Actor config (``actor_rollout_ref.actor``): the policy's PPO update."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.workers.config.base import BaseConfig, bounded_field, registry_field
from verl.workers.config.roles import CheckpointConfig, ForwardConfig, PPOUpdateConfig

__all__ = [
    "ActorConfig",
    "AdaptiveEntropyConfig",
    "CheckpointConfig",
    "FSDPActorConfig",
    "PolicyLossConfig",
    "KL_LOSS_TYPES",
]

KL_LOSS_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full")
"""KL estimators of ``core_algos.kl_penalty``; a trailing ``+`` selects the straight-through variant."""


@dataclass
class PolicyLossConfig(BaseConfig):
    """Which policy loss is used and its loss-specific coefficients."""

    loss_mode: str = registry_field("vanilla", "verl.trainer.ppo.algos.registry:POLICY_LOSS_REGISTRY")
    """Registered policy loss (``core_algos.get_policy_loss_fn``), e.g. ``vanilla``, ``gspo``, ``clip_cov``."""

    clip_cov_ratio: float = bounded_field(0.0002, ge=0.0, le=1.0)
    """Clip-Cov: fraction of tokens whose gradient is detached."""

    clip_cov_lb: float = 1.0
    """Clip-Cov: lower bound of the covariance selection window."""

    clip_cov_ub: float = 5.0
    """Clip-Cov: upper bound of the covariance selection window."""

    kl_cov_ratio: float = bounded_field(0.0002, ge=0.0, le=1.0)
    """KL-Cov: fraction of tokens that get the KL penalty."""

    ppo_kl_coef: float = 0.1
    """KL-Cov: coefficient of the KL penalty."""


@dataclass
class AdaptiveEntropyConfig(BaseConfig):
    """Skywork-OR1's adaptive entropy control (He et al., 2025, arXiv:2505.22312, sec. 3.2).

    Each step the coefficient ``c`` moves by ``delta_ent_coef`` towards keeping the policy's entropy at
    ``target_entropy`` (up when the entropy is below it, down when above), clipped to ``[min_ent_coef,
    max_ent_coef]``; the entropy bonus applies only while the entropy is at or below the target. It replaces
    ``entropy_coeff`` when enabled (which then only gives the starting coefficient).
    """

    enabled: bool = False
    """Steer the entropy coefficient towards ``target_entropy`` each step."""

    target_entropy: float = bounded_field(0.2, ge=0.0)
    """Mean token entropy (nats) to hold the policy at."""

    max_ent_coef: float = bounded_field(0.005, ge=0.0)
    """Largest coefficient the controller reaches."""

    min_ent_coef: float = bounded_field(0.0, ge=0.0)
    """Smallest coefficient the controller reaches."""

    delta_ent_coef: float = bounded_field(0.0001, ge=0.0)
    """Change of the coefficient per step."""


@dataclass
class ActorConfig(PPOUpdateConfig, ForwardConfig):
    """The policy's PPO update: batch sizes, clipping, entropy and KL terms, optimizer."""

    clip_ratio: float = bounded_field(0.2, ge=0.0)
    """PPO clip range epsilon, used for both sides unless ``clip_ratio_low/high`` are set."""

    clip_ratio_low: float | None = bounded_field(0.2, ge=0.0)
    """Lower clip range: the ratio is clipped at ``1 - clip_ratio_low``; null uses ``clip_ratio``."""

    clip_ratio_high: float | None = bounded_field(0.2, ge=0.0)
    """Upper clip range: the ratio is clipped at ``1 + clip_ratio_high`` (DAPO's clip-higher); null uses
    ``clip_ratio``."""

    clip_ratio_c: float = bounded_field(3.0, gt=1.0)
    """Dual-clip PPO bound for negative advantages (arXiv:1912.09729)."""

    entropy_coeff: float = 0.0
    """Weight of the entropy bonus in the actor loss."""

    adaptive_entropy: AdaptiveEntropyConfig = field(default_factory=AdaptiveEntropyConfig)
    """Skywork-OR1's adaptive entropy coefficient (replaces ``entropy_coeff`` when enabled)."""

    use_kl_loss: bool = False
    """Add ``kl_loss_coef * KL(policy || reference)`` to the actor loss (needs the reference model)."""

    kl_loss_coef: float = bounded_field(0.001, ge=0.0)
    """Weight of the KL loss."""

    kl_loss_type: str = "low_var_kl"
    """KL estimator of the KL loss: one of ``KL_LOSS_TYPES``, optionally with a trailing ``+``."""

    tau_pos: float = bounded_field(1.0, gt=0.0)
    """SAPO: temperature of the soft gate for tokens with positive advantage."""

    tau_neg: float = bounded_field(1.05, gt=0.0)
    """SAPO: temperature of the soft gate for tokens with negative advantage."""

    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    """Policy loss selection."""

    skip_old_log_prob_on_policy: bool = True
    """On an on-policy step (``ppo_epochs=1``, ``ppo_mini_batch_size`` equal to ``data.train_batch_size``, no
    in-reward KL or rollout correction), take ``old_log_probs`` from the update's own forward pass (detached)
    instead of a separate log-prob pass: the same values, one forward pass less. False always runs the pass."""

    freeze_vision_tower: bool = False
    """Vision-language models: keep the vision encoder's weights fixed (only the language model trains)."""


@dataclass
class FSDPActorConfig(ActorConfig):
    """The actor trained with the FSDP2 engine (the only engine of this build)."""

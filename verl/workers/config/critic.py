"""Critic config (``critic``): the value model of PPO with GAE."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.workers.config.base import bounded_field
from verl.workers.config.model import HFModelConfig
from verl.workers.config.roles import FSDPHolderConfig, PPOUpdateConfig


@dataclass
class CriticModelConfig(HFModelConfig, FSDPHolderConfig):
    """The critic's model (a causal LM whose head is replaced by a scalar value head) and its sharding."""


@dataclass
class CriticConfig(PPOUpdateConfig):
    """The value model: its model, optimizer and value-loss clipping."""

    enable: bool | None = None
    """Run a critic; null decides from ``algorithm.adv_estimator`` (only ``gae`` needs one)."""

    model: CriticModelConfig = field(default_factory=CriticModelConfig)
    """Critic model; the shipped YAML starts it from the actor's model path."""

    cliprange_value: float = bounded_field(0.5, ge=0.0)
    """Value clipping: new values stay within ``old_value +- cliprange_value`` in the clipped value loss."""

    forward_micro_batch_size_per_gpu: int | None = bounded_field(None, gt=0)
    """Sequences per value forward pass on one worker; the shipped YAML ties it to ``ppo_micro_batch_size_per_gpu``."""

    forward_max_token_len_per_gpu: int | None = bounded_field(None, gt=0)
    """Token budget of a value forward micro-batch; the shipped YAML ties it to ``ppo_max_token_len_per_gpu``."""

    rollout_n: int = bounded_field(1, gt=0)
    """Responses per prompt, used to scale ``ppo_mini_batch_size``; the shipped YAML ties it to ``rollout.n``."""


FSDPCriticConfig = CriticConfig
"""verl's name of the FSDP critic config (the only critic engine of this build)."""

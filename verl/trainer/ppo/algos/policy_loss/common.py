"""Pieces shared by the policy losses: reading the actor config, the importance ratio, the final reduction.

Every loss has the agreed signature ``fn(old_log_prob, log_prob, advantages, response_mask,
loss_agg_mode="token-mean", config=None, rollout_is_weights=None, global_num_tokens=None,
global_num_seqs=None) -> (pg_loss, metrics)`` with metrics ``pg_clipfrac``, ``pg_clipfrac_lower`` and
``ppo_kl`` (floats); all tensors are ``(bs, T)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig

from verl.utils.config import as_typed_config
from verl.workers.config.actor import ActorConfig

from ..aggregation import agg_loss
from ..masked_ops import masked_mean

# exp() of a log-ratio beyond this would overflow float32; verl clamps at the same value.
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class ClipBounds:
    """PPO clip range ``[1 - low, 1 + high]`` and the dual-clip constant ``c``."""

    low: float
    high: float
    dual_clip_c: float


def require_config(config: ActorConfig | DictConfig | dict | None, loss_name: str) -> ActorConfig:
    """The actor config as an :class:`ActorConfig` (a DictConfig of its keys is checked and completed with the
    dataclass defaults); None fails naming the loss."""
    if config is None:
        raise ValueError(f"policy loss {loss_name!r} needs the actor config (actor_rollout_ref.actor); got None")
    return as_typed_config(config, ActorConfig, "actor_rollout_ref.actor")


def clip_bounds(config: ActorConfig) -> ClipBounds:
    """``clip_ratio_low`` / ``clip_ratio_high`` (null -> ``clip_ratio``) and ``clip_ratio_c`` of the actor config."""
    return ClipBounds(
        low=config.clip_ratio if config.clip_ratio_low is None else config.clip_ratio_low,
        high=config.clip_ratio if config.clip_ratio_high is None else config.clip_ratio_high,
        dual_clip_c=config.clip_ratio_c,
    )


def log_ratio_and_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log r = clamp(log_prob - old_log_prob, -20, 20)`` and ``r = exp(log r)``."""
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-LOG_RATIO_CLAMP, max=LOG_RATIO_CLAMP)
    return log_ratio, torch.exp(log_ratio)


def reduce_policy_loss(
    pg_losses: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    rollout_is_weights: torch.Tensor | None,
    global_num_tokens: Any,
    global_num_seqs: Any,
) -> torch.Tensor:
    """Multiply by the rollout-correction IS weights (detached) when given, then :func:`agg_loss`."""
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights.detach()
    return agg_loss(
        pg_losses,
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
    )


def metrics(pg_clipfrac: torch.Tensor | float, pg_clipfrac_lower: torch.Tensor | float, ppo_kl: torch.Tensor) -> dict:
    def as_float(x: torch.Tensor | float) -> float:
        return float(x.detach().item()) if isinstance(x, torch.Tensor) else float(x)

    return {
        "pg_clipfrac": as_float(pg_clipfrac),
        "pg_clipfrac_lower": as_float(pg_clipfrac_lower),
        "ppo_kl": as_float(ppo_kl),
    }


def approx_kl(log_ratio: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``ppo_kl = masked_mean(old_log_prob - log_prob)``: the k1 estimate of KL(pi_old || pi)."""
    return masked_mean(-log_ratio.detach(), response_mask)

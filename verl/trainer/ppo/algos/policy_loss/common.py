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


def require_config(config: Any, loss_name: str) -> Any:
    if config is None:
        raise ValueError(f"policy loss {loss_name!r} needs the actor config (actor_rollout_ref.actor); got None")
    return config


def clip_bounds(config: Any) -> ClipBounds:
    """Read ``clip_ratio`` (verl default 0.2), ``clip_ratio_low`` / ``clip_ratio_high`` (None -> ``clip_ratio``)
    and ``clip_ratio_c`` (default 3.0) from the actor config."""
    clip_ratio = getattr(config, "clip_ratio", 0.2)
    low = getattr(config, "clip_ratio_low", None)
    high = getattr(config, "clip_ratio_high", None)
    return ClipBounds(
        low=clip_ratio if low is None else low,
        high=clip_ratio if high is None else high,
        dual_clip_c=getattr(config, "clip_ratio_c", 3.0),
    )


def policy_loss_option(config: Any, name: str, default: float) -> float:
    """``config.policy_loss.<name>``, falling back to verl's default when the sub-config or field is absent."""
    sub_config = getattr(config, "policy_loss", None)
    value = getattr(sub_config, name, None) if sub_config is not None else None
    return default if value is None else value


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

"""Optimizer and learning-rate schedule from ``OptimConfig`` (verl's field names).

Schedule: linear warmup from 0 over ``num_warmup_steps`` (``lr_warmup_steps`` if > 0, else
``lr_warmup_steps_ratio * total_training_steps``), then constant, or cosine decay to
``min_lr_ratio * lr`` over the remaining steps: ``f(t) = m + (1 - m) * 0.5 * (1 + cos(pi * c * 2 * p))``
with progress ``p = (t - warmup) / (total - warmup)`` and ``c = num_cycles`` (0.5 = half a cosine).
"""

from __future__ import annotations

import logging
import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from verl.workers.config import OptimConfig


def num_warmup_steps(config: OptimConfig) -> int:
    """``lr_warmup_steps`` when positive, else ``lr_warmup_steps_ratio * total_training_steps``."""
    if config.lr_warmup_steps is not None and config.lr_warmup_steps > 0:
        return int(config.lr_warmup_steps)
    if config.lr_warmup_steps_ratio > 0:
        if config.total_training_steps <= 0:
            raise ValueError("optim.lr_warmup_steps_ratio needs optim.total_training_steps > 0")
        return int(config.lr_warmup_steps_ratio * config.total_training_steps)
    return 0


def default_implementation(params: list[torch.Tensor], overrides: dict) -> dict:
    """``overrides`` with ``fused=True`` added when every parameter is on a CUDA device and neither ``fused`` nor
    ``foreach`` is set: AdamW's step as one kernel instead of torch's multi-tensor default. Same update; on one H100
    the 0.5B update of ``bench_gpu_update`` took 25-58 ms less a step (``gpu_session16_2026-11-28.md``). CPU and
    offloaded parameters keep torch's default."""
    if "fused" in overrides or "foreach" in overrides or not all(p.device.type == "cuda" for p in params):
        return overrides
    return {**overrides, "fused": True}


def build_optimizer(module: nn.Module, config: OptimConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters only (LoRA: just the adapters); ``override_optimizer_config`` entries
    (e.g. ``eps``) are passed to its constructor, after :func:`default_implementation` (fused on CUDA)."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the module has no trainable parameters")
    extra = default_implementation(params, dict(config.override_optimizer_config or {}))
    return torch.optim.AdamW(params, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay, **extra)


def lr_lambda(config: OptimConfig):
    """Multiplier of the base lr at scheduler step ``t`` (see the module docstring); the schedule type is
    ``warmup_style`` when set (verl's deprecated spelling), else ``lr_scheduler_type``."""
    warmup = num_warmup_steps(config)
    kind = config.scheduler_type
    if kind not in ("constant", "cosine"):
        raise ValueError(f"unknown optim.lr_scheduler_type {kind!r}; expected one of ['constant', 'cosine']")
    if kind == "cosine" and config.total_training_steps <= 0:
        raise ValueError("optim.lr_scheduler_type=cosine needs optim.total_training_steps > 0")
    floor = config.min_lr_ratio

    def multiplier(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        if kind == "constant":
            return 1.0
        progress = (step - warmup) / max(1, config.total_training_steps - warmup)
        progress = min(progress, 1.0)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * config.num_cycles * 2.0 * progress))

    return multiplier


def build_lr_scheduler(optimizer: torch.optim.Optimizer, config: OptimConfig) -> LambdaLR:
    return LambdaLR(optimizer, lr_lambda(config))


def clip_grad_norm_and_step(module: nn.Module, optimizer: torch.optim.Optimizer, max_norm: float | None) -> float:
    """Clip the global grad norm of ``module``'s trainable parameters to ``max_norm`` (no clipping when it is
    None or <= 0) and step. On a non-finite norm the step is skipped and gradients are dropped, as in verl.
    Returns the pre-clip norm (a float; DTensor norms are gathered)."""
    from verl.utils.device import current_device

    params = [p for p in module.parameters() if p.requires_grad and p.grad is not None]
    if not params:
        raise RuntimeError("no gradients to clip: run backward before clip_grad_norm_and_step")
    limit = max_norm if max_norm is not None and max_norm > 0 else float("inf")
    total_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    # with parameter offload the gradients live on the CPU while the mesh reduces on the accelerator:
    # reduce the (partial) norm on the compute device, as verl's fsdp2_clip_grad_norm_ does
    total_norm = total_norm.to(current_device())
    if hasattr(total_norm, "full_tensor"):
        total_norm = total_norm.full_tensor()
    grad_norm = float(total_norm)
    if math.isfinite(grad_norm):
        torch.nn.utils.clip_grads_with_norm_(params, limit, total_norm.to(params[0].grad.device))
        optimizer.step()
    else:
        logging.getLogger(__name__).warning("non-finite grad norm %s: skipping this optimizer step", grad_norm)
    optimizer.zero_grad(set_to_none=True)
    return grad_norm

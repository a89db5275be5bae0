"""Optimizer and learning-rate schedule from ``OptimConfig`` (verl's field names).

Schedule: linear warmup from 0 over ``num_warmup_steps`` (``lr_warmup_steps`` if > 0, else
``lr_warmup_steps_ratio * total_training_steps``), then constant, or cosine decay to
``min_lr_ratio * lr`` over the remaining steps: ``f(t) = m + (1 - m) * 0.5 * (1 + cos(pi * c * 2 * p))``
with progress ``p = (t - warmup) / (total - warmup)`` and ``c = num_cycles`` (0.5 = half a cosine).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR


@dataclass
class OptimSettings:
    lr: float = 1e-6
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_warmup_steps: int = -1
    lr_warmup_steps_ratio: float = 0.0
    total_training_steps: int = -1
    lr_scheduler_type: str = "constant"
    min_lr_ratio: float = 0.0
    num_cycles: float = 0.5
    clip_grad: float = 1.0

    @classmethod
    def from_config(cls, optim_config) -> OptimSettings:
        if isinstance(optim_config, OptimSettings):
            return optim_config
        values = {}
        for name in cls.__dataclass_fields__:
            value = getattr(optim_config, name, None) if optim_config is not None else None
            if value is not None:
                values[name] = tuple(value) if name == "betas" else value
        extra = getattr(optim_config, "override_optimizer_config", None) or {}
        for name in ("eps",):  # optimizer kwargs verl passes through override_optimizer_config
            if name in extra:
                values[name] = float(extra[name])
        # verl's deprecated key for the schedule type wins when set
        if getattr(optim_config, "warmup_style", None):
            values["lr_scheduler_type"] = optim_config.warmup_style
        return cls(**values)

    def num_warmup_steps(self) -> int:
        if self.lr_warmup_steps is not None and self.lr_warmup_steps > 0:
            return int(self.lr_warmup_steps)
        if self.lr_warmup_steps_ratio > 0:
            if self.total_training_steps <= 0:
                raise ValueError("optim.lr_warmup_steps_ratio needs optim.total_training_steps > 0")
            return int(self.lr_warmup_steps_ratio * self.total_training_steps)
        return 0


def build_optimizer(module: nn.Module, settings: OptimSettings) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters only (LoRA: just the adapters)."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the module has no trainable parameters")
    return torch.optim.AdamW(
        params, lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay
    )


def lr_lambda(settings: OptimSettings):
    """Multiplier of the base lr at scheduler step ``t`` (see the module docstring)."""
    warmup = settings.num_warmup_steps()
    kind = settings.lr_scheduler_type
    if kind not in ("constant", "cosine"):
        raise ValueError(f"unknown optim.lr_scheduler_type {kind!r}; expected one of ['constant', 'cosine']")
    if kind == "cosine" and settings.total_training_steps <= 0:
        raise ValueError("optim.lr_scheduler_type=cosine needs optim.total_training_steps > 0")
    floor = settings.min_lr_ratio

    def multiplier(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        if kind == "constant":
            return 1.0
        progress = (step - warmup) / max(1, settings.total_training_steps - warmup)
        progress = min(progress, 1.0)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * settings.num_cycles * 2.0 * progress))

    return multiplier


def build_lr_scheduler(optimizer: torch.optim.Optimizer, settings: OptimSettings) -> LambdaLR:
    return LambdaLR(optimizer, lr_lambda(settings))


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

"""Optimizer and learning-rate schedule config (``actor_rollout_ref.actor.optim``, ``critic.optim``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, choice_field


@dataclass
class OptimConfig(BaseConfig):
    """AdamW with a warmup followed by a constant or cosine learning-rate schedule."""

    optimizer: str = choice_field("AdamW", ("AdamW",))
    """Optimizer class name."""

    optimizer_impl: str = choice_field("torch.optim", ("torch.optim",))
    """Module the optimizer class is imported from."""

    lr: float = bounded_field(1e-6, ge=0.0)
    """Peak learning rate."""

    lr_warmup_steps: int | None = -1
    """Warmup steps; a negative value derives them from ``lr_warmup_steps_ratio``."""

    lr_warmup_steps_ratio: float = bounded_field(0.0, ge=0.0, le=1.0)
    """Warmup steps as a fraction of the total training steps (used when ``lr_warmup_steps`` < 0)."""

    total_training_steps: int = -1
    """Total optimizer steps for the schedule; filled in by the trainer from the data and epochs."""

    weight_decay: float = bounded_field(0.01, ge=0.0)
    """Decoupled weight decay of AdamW."""

    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW ``(beta1, beta2)`` coefficients of the running averages of the gradient and its square."""

    clip_grad: float = bounded_field(1.0, gt=0.0)
    """Gradient-norm clip used by the engine; the shipped YAML ties it to the owning role's ``grad_clip``."""

    lr_scheduler_type: str = choice_field("constant", ("constant", "cosine"))
    """Schedule after warmup: ``constant`` or ``cosine`` decay."""

    warmup_style: str | None = choice_field(None, (None, "constant", "cosine"))
    """Deprecated name of ``lr_scheduler_type``; when set it overrides it."""

    min_lr_ratio: float = bounded_field(0.0, ge=0.0, le=1.0)
    """Cosine schedule floor as a fraction of ``lr``."""

    num_cycles: float = bounded_field(0.5, ge=0.0)
    """Number of cosine half-waves over the decay (0.5 decays once from peak to floor)."""

    override_optimizer_config: dict[str, Any] | None = None
    """Extra keyword arguments passed to the optimizer constructor (e.g. ``eps``)."""

    @property
    def scheduler_type(self) -> str:
        """The effective schedule: ``warmup_style`` when set (deprecated spelling), else ``lr_scheduler_type``."""
        return self.warmup_style or self.lr_scheduler_type

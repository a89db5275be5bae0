"""KL-coefficient controllers for the in-reward KL penalty (``algorithm.kl_ctrl``).

Adaptive control follows Ziegler et al., "Fine-Tuning Language Models from Human Preferences"
(arXiv:1909.08593, sec. 2.2): ``e = clip(KL / KL_target - 1, -0.2, 0.2)``, ``beta <- beta * (1 + e * n / H)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FixedKLController:
    """Constant KL coefficient ``value = kl_coef``."""

    def __init__(self, kl_coef: float):
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """No-op: the coefficient never changes."""


class AdaptiveKLController:
    """Proportional controller steering the measured KL towards ``target_kl`` over ``horizon`` samples."""

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int):
        if target_kl <= 0 or horizon <= 0:
            raise ValueError(f"AdaptiveKLController needs target_kl > 0 and horizon > 0, got {target_kl}, {horizon}")
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        """``value *= 1 + clip(current_kl / target - 1, -0.2, 0.2) * n_steps / horizon``."""
        proportional_error = min(max(float(current_kl) / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + proportional_error * n_steps / self.horizon


def _fixed(kl_ctrl_config: Any) -> FixedKLController:
    return FixedKLController(kl_coef=getattr(kl_ctrl_config, "kl_coef", 0.001))


def _adaptive(kl_ctrl_config: Any) -> AdaptiveKLController:
    horizon = getattr(kl_ctrl_config, "horizon", 10000)
    target_kl = getattr(kl_ctrl_config, "target_kl", 0.1)
    return AdaptiveKLController(getattr(kl_ctrl_config, "kl_coef", 0.001), target_kl, horizon)


KL_CONTROLLER_TYPES: dict[str, Callable[[Any], FixedKLController | AdaptiveKLController]] = {
    "fixed": _fixed,
    "adaptive": _adaptive,
}


def get_kl_controller(kl_ctrl_config: Any) -> FixedKLController | AdaptiveKLController:
    """Build the controller named by ``kl_ctrl_config.type`` (``fixed`` | ``adaptive``) from
    ``kl_coef`` (default 0.001), ``target_kl`` (0.1) and ``horizon`` (10000), verl's defaults."""
    kind = getattr(kl_ctrl_config, "type", "fixed")
    if kind not in KL_CONTROLLER_TYPES:
        raise ValueError(f"Unknown algorithm.kl_ctrl.type {kind!r}; choose one of {sorted(KL_CONTROLLER_TYPES)}")
    return KL_CONTROLLER_TYPES[kind](kl_ctrl_config)

"""KL-coefficient controllers for the in-reward KL penalty (``algorithm.kl_ctrl``).

Adaptive control follows Ziegler et al., "Fine-Tuning Language Models from Human Preferences"
(arXiv:1909.08593, sec. 2.2): ``e = clip(KL / KL_target - 1, -0.2, 0.2)``, ``beta <- beta * (1 + e * n / H)``.
"""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from verl.trainer.config.algorithm import KLControlConfig
from verl.utils.config import as_typed_config


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


def _fixed(kl_ctrl_config: KLControlConfig) -> FixedKLController:
    return FixedKLController(kl_coef=kl_ctrl_config.kl_coef)


def _adaptive(kl_ctrl_config: KLControlConfig) -> AdaptiveKLController:
    return AdaptiveKLController(kl_ctrl_config.kl_coef, kl_ctrl_config.target_kl, kl_ctrl_config.horizon)


KL_CONTROLLER_TYPES: dict[str, Callable[[KLControlConfig], FixedKLController | AdaptiveKLController]] = {
    "fixed": _fixed,
    "adaptive": _adaptive,
}


def get_kl_controller(kl_ctrl_config: KLControlConfig | DictConfig | dict) -> FixedKLController | AdaptiveKLController:
    """Build the controller named by ``kl_ctrl_config.type`` (``fixed`` | ``adaptive``) from ``kl_coef``,
    ``target_kl`` and ``horizon`` (``algorithm.kl_ctrl``, defaults in :class:`KLControlConfig`)."""
    kl_ctrl_config = as_typed_config(kl_ctrl_config, KLControlConfig, "algorithm.kl_ctrl")
    kind = kl_ctrl_config.type
    if kind not in KL_CONTROLLER_TYPES:
        raise ValueError(f"Unknown algorithm.kl_ctrl.type {kind!r}; choose one of {sorted(KL_CONTROLLER_TYPES)}")
    return KL_CONTROLLER_TYPES[kind](kl_ctrl_config)

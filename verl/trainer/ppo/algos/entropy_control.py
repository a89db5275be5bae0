"""Skywork-OR1's adaptive entropy control (He et al., 2025, arXiv:2505.22312, sec. 3.2).

With ``e_k`` the mean token entropy of the policy on step k's batch, target ``H*``, step ``Δ`` and bounds
``[c_min, c_max]``::

    α_k     = c_k · 1[e_k <= H*]                                  (the bonus applies only at or below the target)
    c_{k+1} = clip(c_k + Δ, c_min, c_max)   if e_k < H*
              clip(c_k - Δ, c_min, c_max)   if e_k > H*
              c_k                            otherwise

and the actor loss is ``pg_loss - α_k · entropy``. ``c_0`` is ``actor.entropy_coeff``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AdaptiveEntropyController"]


class AdaptiveEntropyController:
    """The coefficient ``c_k`` and its update (see the module docstring); state is one float, saved with the run."""

    def __init__(self, config: Any, initial_coef: float = 0.0):
        self.target_entropy = float(config.target_entropy)
        self.min_coef = float(config.min_ent_coef)
        self.max_coef = float(config.max_ent_coef)
        self.delta = float(config.delta_ent_coef)
        self.coef = min(max(float(initial_coef), self.min_coef), self.max_coef)

    def step(self, entropy: float) -> float:
        """α_k for this step's update given e_k = ``entropy``; advances ``c_k`` to ``c_{k+1}``."""
        alpha = self.coef if entropy <= self.target_entropy else 0.0
        if entropy < self.target_entropy:
            self.coef = min(self.coef + self.delta, self.max_coef)
        elif entropy > self.target_entropy:
            self.coef = max(self.coef - self.delta, self.min_coef)
        return alpha

    def state_dict(self) -> dict[str, float]:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.coef = float(state["coef"])

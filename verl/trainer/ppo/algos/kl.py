"""Per-token KL estimators between the policy and the reference policy.

With ``delta = log_prob - ref_log_prob`` (samples drawn from the policy), following J. Schulman,
"Approximating KL divergence" (http://joschu.net/blog/kl-approx.html):

* ``kl`` / ``k1``:          ``delta``                        (unbiased, can be negative)
* ``abs``:                  ``|delta|``
* ``mse`` / ``k2``:         ``delta**2 / 2``                 (low variance, biased)
* ``low_var_kl`` / ``k3``:  ``exp(-delta) - 1 + delta``      (unbiased, never negative; ``delta`` clamped to
  [-20, 20] and the result to [0, 10] for numerical safety)

A name ending in ``+`` (e.g. ``k3+``) returns the value of the named estimator with the gradient of
``k2`` (straight-through), which is the unbiased gradient of KL when used as a loss (verl PR #2953).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _k1(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    return log_prob - ref_log_prob


def _abs(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    return (log_prob - ref_log_prob).abs()


def _k2(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    return 0.5 * (log_prob - ref_log_prob).square()


def _k3(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    log_ratio_ref_over_policy = torch.clamp(ref_log_prob - log_prob, min=-20.0, max=20.0)
    # expm1 avoids the cancellation of exp(x) - 1 near x = 0; the clamp at 0 removes the float round-off
    # that can still leave a tiny negative value (k3 >= 0 exactly).
    k3 = torch.expm1(log_ratio_ref_over_policy) - log_ratio_ref_over_policy
    return torch.clamp(k3, min=0.0, max=10.0)


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "kl": _k1,
    "k1": _k1,
    "abs": _abs,
    "mse": _k2,
    "k2": _k2,
    "low_var_kl": _k3,
    "k3": _k3,
}


def kl_penalty(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """Per-token KL estimate ``(bs, T)`` of ``KL(pi || pi_ref)`` from ``log_prob (bs, T)``, ``ref_log_prob (bs, T)``.

    ``kl_penalty`` is one of ``kl``/``k1``, ``abs``, ``mse``/``k2``, ``low_var_kl``/``k3``, each optionally
    suffixed with ``+`` for the straight-through k2 gradient (see the module docstring).
    """
    straight_through = kl_penalty.endswith("+")
    base_name = kl_penalty[:-1] if straight_through else kl_penalty
    if base_name not in KL_ESTIMATORS:
        known = sorted(KL_ESTIMATORS) + sorted(f"{name}+" for name in KL_ESTIMATORS)
        raise ValueError(f"Unknown kl_penalty {kl_penalty!r}; choose one of {known}")
    value = KL_ESTIMATORS[base_name](log_prob, ref_log_prob)
    if not straight_through:
        return value
    k2 = _k2(log_prob, ref_log_prob)
    return k2 - k2.detach() + value.detach()

"""Name -> function registries for advantage estimators and policy losses.

These are the only dispatch path: the trainer and the actor look a name from the config up here
and never special-case one. Users add their own with the decorators::

    @register_adv_est("my_estimator")
    def my_estimator(token_level_rewards, response_mask, index, **kwargs): ...

    @register_policy_loss("my_loss")
    def my_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, ...): ...
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any


class AdvantageEstimator(str, Enum):
    """Names of the built-in advantage estimators (``algorithm.adv_estimator``).

    Custom estimators need no entry here: register them by string name with :func:`register_adv_est`.
    """

    GAE = "gae"
    GRPO = "grpo"
    GRPO_PASSK = "grpo_passk"
    GRPO_VECTORIZED = "grpo_vectorized"
    RLOO = "rloo"
    RLOO_VECTORIZED = "rloo_vectorized"
    REINFORCE_PLUS_PLUS = "reinforce_plus_plus"
    REINFORCE_PLUS_PLUS_BASELINE = "reinforce_plus_plus_baseline"
    REMAX = "remax"
    OPO = "opo"
    GPG = "gpg"
    OPTIMAL_TOKEN_BASELINE = "optimal_token_baseline"


ADV_ESTIMATOR_REGISTRY: dict[str, Callable[..., Any]] = {}
POLICY_LOSS_REGISTRY: dict[str, Callable[..., Any]] = {}


def _name_of(name_or_enum: str | Enum) -> str:
    return name_or_enum.value if isinstance(name_or_enum, Enum) else str(name_or_enum)


def _origin(fn: Callable[..., Any]) -> tuple[str, str]:
    return fn.__module__, fn.__qualname__


def _register(registry: dict[str, Callable[..., Any]], kind: str, name_or_enum: str | Enum):
    name = _name_of(name_or_enum)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = registry.get(name)
        # Re-registering the same function (module reloaded) is harmless; a different one is a name clash.
        if existing is not None and existing is not fn and _origin(existing) != _origin(fn):
            raise ValueError(
                f"{kind} {name!r} is already registered by {existing.__module__}.{existing.__qualname__}; "
                f"choose another name for {fn.__module__}.{fn.__qualname__}"
            )
        registry[name] = fn
        return fn

    return decorator


def _lookup(registry: dict[str, Callable[..., Any]], kind: str, name_or_enum: str | Enum) -> Callable[..., Any]:
    name = _name_of(name_or_enum)
    if name not in registry:
        raise ValueError(f"Unknown {kind} {name!r}; registered: {sorted(registry)}")
    return registry[name]


def register_adv_est(name_or_enum: str | AdvantageEstimator) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering an advantage estimator under ``name_or_enum``.

    The estimator declares its inputs by its parameter names; :func:`compute_advantage` passes those it
    names (``token_level_rewards``, ``response_mask``, ``index``, ``values``, ``reward_baselines``,
    ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``, ``config``, ``old_log_probs``, ``sum_pi_squared``,
    ``rollout_is_weights``), or all of them when it takes ``**kwargs``. It returns
    ``(advantages (bs, T), returns (bs, T))``.
    """
    return _register(ADV_ESTIMATOR_REGISTRY, "advantage estimator", name_or_enum)


def get_adv_estimator_fn(name_or_enum: str | AdvantageEstimator) -> Callable[..., Any]:
    """The estimator registered under ``name_or_enum``; unknown names fail listing the registered ones."""
    return _lookup(ADV_ESTIMATOR_REGISTRY, "advantage estimator", name_or_enum)


def register_policy_loss(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a policy loss ``fn(old_log_prob, log_prob, advantages, response_mask,
    loss_agg_mode="token-mean", config=None, rollout_is_weights=None, global_num_tokens=None,
    global_num_seqs=None) -> (pg_loss, metrics)``."""
    return _register(POLICY_LOSS_REGISTRY, "policy loss", name)


def get_policy_loss_fn(name: str) -> Callable[..., Any]:
    """The policy loss registered under ``name``; unknown names fail listing the registered ones."""
    return _lookup(POLICY_LOSS_REGISTRY, "policy loss", name)

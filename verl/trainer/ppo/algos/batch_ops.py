"""Batch-level steps on a rollout ``DataProto``: the in-reward KL penalty and advantage computation.

Both work only through the registries, so the trainer calls them the same way for every algorithm.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from . import advantage as _builtin_estimators  # noqa: F401  (registers the built-in estimators)
from .kl import kl_penalty as kl_penalty_fn
from .masked_ops import masked_mean
from .registry import AdvantageEstimator, get_adv_estimator_fn

# Where each estimator input comes from in the batch. An estimator names what it needs as parameters.
_BATCH_TENSOR_INPUTS = (
    "token_level_rewards",
    "response_mask",
    "values",
    "reward_baselines",
    "old_log_probs",
    "sum_pi_squared",
    "rollout_is_weights",
)
_INPUT_HINTS = {
    "values": "use a critic (critic.enable / algorithm.adv_estimator=gae computes values with the critic)",
    "reward_baselines": "ReMax needs the reward of a greedy rollout per prompt in batch['reward_baselines']",
    "sum_pi_squared": "set actor_rollout_ref.actor.calculate_sum_pi_squared=True",
    "old_log_probs": "compute old log-probs before the advantage step",
    "index": "the batch needs non_tensor_batch['uid'] (one group id per prompt)",
}


def _response_mask(data: Any) -> torch.Tensor:
    if "response_mask" in data.batch.keys():
        return data.batch["response_mask"]
    # verl derives it from the attention mask when the rollout did not store it.
    response_length = data.batch["responses"].shape[-1]
    return data.batch["attention_mask"][:, -response_length:]


def apply_kl_penalty(data: Any, kl_ctrl: Any, kl_penalty: str = "kl") -> tuple[Any, dict[str, float]]:
    """``token_level_rewards = token_level_scores - beta * KL(old_log_probs, ref_log_prob)`` on response tokens.

    ``beta = kl_ctrl.value`` before the update; the controller is then updated with the batch-mean of the
    per-sequence token-mean KL and ``n_steps = batch size``. Writes ``batch['token_level_rewards']``.

    Returns:
        ``(data, metrics)`` with ``actor/reward_kl_penalty`` (that mean KL) and ``actor/reward_kl_penalty_coeff``
        (``beta``).
    """
    response_mask = _response_mask(data)
    token_level_scores = data.batch["token_level_scores"]
    kld = kl_penalty_fn(data.batch["old_log_probs"], data.batch["ref_log_prob"], kl_penalty) * response_mask
    beta = kl_ctrl.value
    data.batch["token_level_rewards"] = token_level_scores - beta * kld

    current_kl = float(masked_mean(kld, response_mask, axis=-1).mean().item())
    kl_ctrl.update(current_kl=current_kl, n_steps=token_level_scores.shape[0])
    return data, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": float(beta)}


def _accepted_inputs(estimator: Callable[..., Any]) -> tuple[set[str], set[str], bool]:
    """(all parameter names, required parameter names, takes **kwargs) of an estimator."""
    names, required, var_keyword = set(), set(), False
    for parameter in inspect.signature(estimator).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            var_keyword = True
        elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
            names.add(parameter.name)
            if parameter.default is inspect.Parameter.empty:
                required.add(parameter.name)
    return names, required, var_keyword


def compute_advantage(
    data: Any,
    adv_estimator: str | AdvantageEstimator,
    gamma: float = 1.0,
    lam: float = 1.0,
    num_repeat: int = 1,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
) -> Any:
    """Run the estimator registered as ``adv_estimator`` and write ``batch['advantages']`` / ``batch['returns']``.

    The available inputs are the batch tensors ``token_level_rewards``, ``response_mask``, ``values``,
    ``reward_baselines``, ``old_log_probs``, ``sum_pi_squared``, ``rollout_is_weights`` (where present), the
    group labels ``index = non_tensor_batch['uid']``, and ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``,
    ``config`` (the algorithm config). The estimator receives those its signature names (all of them when
    it takes ``**kwargs``); a required one that is missing fails naming the key. ``num_repeat`` (rollout.n)
    is kept for verl compatibility; groups come from ``uid``.
    """
    estimator = get_adv_estimator_fn(adv_estimator)
    available: dict[str, Any] = {
        "response_mask": _response_mask(data),
        "gamma": gamma,
        "lam": lam,
        "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo,
        "config": config,
    }
    batch_keys = set(data.batch.keys())
    for key in _BATCH_TENSOR_INPUTS:
        if key in batch_keys and key not in available:
            available[key] = data.batch[key]
    if "uid" in data.non_tensor_batch:
        available["index"] = data.non_tensor_batch["uid"]

    names, required, var_keyword = _accepted_inputs(estimator)
    missing = sorted(required - available.keys())
    if missing:
        hints = "; ".join(f"{name}: {_INPUT_HINTS.get(name, 'not in the batch')}" for name in missing)
        raise KeyError(
            f"advantage estimator {str(getattr(adv_estimator, 'value', adv_estimator))!r} needs {missing} ({hints})"
        )
    kwargs = available if var_keyword else {name: value for name, value in available.items() if name in names}
    advantages, returns = estimator(**kwargs)
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns
    return data

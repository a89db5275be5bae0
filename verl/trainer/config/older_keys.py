"""Older verl spellings whose key now lives elsewhere in the tree, rewritten to the current keys before Hydra runs.

:data:`~verl.trainer.config.pins.RENAMED_KEYS` covers a renamed last part (``use_rmpad``); the tables here cover keys
that moved to another group (:data:`MOVED_KEYS`) and keys whose one old setting became two current ones
(:data:`EXPANDED_KEYS`). Each rewrite applies only when the current key exists in the schema being composed.
"""

from __future__ import annotations

from collections.abc import Callable

MOVED_KEYS: dict[str, tuple[str, ...]] = {
    # verl's engine-worker config (FSDPEngineConfig) repeats these role keys inside fsdp_config; here the role holds
    # them once (the critic's and reward model's fsdp_config sit under ``model``).
    "fsdp_config.strategy": ("strategy", "../strategy"),
    "fsdp_config.entropy_checkpointing": ("entropy_checkpointing",),
    "fsdp_config.entropy_from_logits_with_chunking": ("entropy_from_logits_with_chunking",),
    "fsdp_config.use_torch_compile": ("use_torch_compile",),
    "fsdp_config.ulysses_sequence_parallel_size": (
        "ulysses_sequence_parallel_size",
        "../ulysses_sequence_parallel_size",
    ),
    # verl's early-2025 KL keys (``actor.kl_loss.type``, ``algorithm.in_reward_kl.*``).
    "kl_loss.type": ("kl_loss_type",),
    "in_reward_kl.type": ("kl_penalty",),
    "in_reward_kl.kl_ctrl.type": ("kl_ctrl.type",),
    "in_reward_kl.kl_ctrl.horizon": ("kl_ctrl.horizon",),
    "in_reward_kl.kl_ctrl.target_kl": ("kl_ctrl.target_kl",),
    # verl's early Megatron trainer kept the reference's and reward model's offload switch on the role itself.
    "ref.param_offload": ("ref.megatron.param_offload",),
    "reward_model.param_offload": ("reward_model.megatron.param_offload",),
}
"""Old dotted suffix -> candidate replacements for it, first declared one wins. A candidate replaces the suffix in
place; a leading ``../`` climbs one more group first (``critic.model.fsdp_config.strategy`` -> ``critic.strategy``)."""


def _number(value: str) -> float:
    return float(value.strip().strip("'\""))


def _true(value: str) -> bool:
    return value.strip().strip("'\"").lower() in ("true", "1", "yes")


EXPANDED_KEYS: dict[str, Callable[[str], list[tuple[str, str]]]] = {
    # In early 2025 a nonzero coefficient alone switched the KL term on.
    "kl_loss.coef": lambda v: [("kl_loss_coef", v), ("use_kl_loss", str(_number(v) != 0))],
    "in_reward_kl.coef": lambda v: [("kl_ctrl.kl_coef", v), ("use_kl_in_reward", str(_number(v) != 0))],
    # GPG's first verl version selected its loss with a switch; it is now a registered policy loss.
    "use_gpg_loss": lambda v: [("policy_loss.loss_mode", "gpg")] if _true(v) else [],
}
"""Old dotted suffix -> ``value -> [(current suffix, value), ...]`` (in place of the old suffix)."""


def _replace(key: str, old: str, new: str) -> str | None:
    """``key`` with its dotted suffix ``old`` replaced by ``new`` (``../`` climbs a group); None if it has no such
    suffix or climbs above the root."""
    if key != old and not key.endswith("." + old):
        return None
    parts = key[: len(key) - len(old)].rstrip(".").split(".") if key != old else []
    while new.startswith("../"):
        if not parts:
            return None
        parts.pop()
        new = new[3:]
    return ".".join([*parts, new]) if parts else new


def rewrite_older_key(key: str, value: str, declared: Callable[[str], bool]) -> list[tuple[str, str]] | None:
    """The current ``(key, value)`` overrides an older spelling stands for, or None when ``key`` is not an older
    spelling (or is declared itself). ``declared(path)`` says whether the schema has ``path``."""
    if declared(key):
        return None
    for old, expand in EXPANDED_KEYS.items():
        pairs = [(_replace(key, old, new), v) for new, v in expand(value)] if _replace(key, old, old) else None
        if pairs is not None and all(k is not None and declared(k) for k, _ in pairs):
            return [(k, v) for k, v in pairs if k is not None]
    for old, candidates in MOVED_KEYS.items():
        for new in candidates:
            current = _replace(key, old, new)
            if current is not None and declared(current):
                return [(current, value)]
    return None

"""Startup checks of Ulysses sequence parallelism (``ulysses_sequence_parallel_size`` of actor, ref and critic).

A role with ``sp > 1`` needs remove-padding, ``sp`` dividing the world size, and a model whose heads ``sp`` can
split (read from the model folder's ``config.json`` when it is on disk; the engine checks again before loading
weights for models found elsewhere).
"""

from __future__ import annotations

import json
import os

from verl.trainer.config.root import PPOConfig


def _config_json(path: str) -> dict | None:
    """``path/config.json``, or None when the folder is not on disk yet (a hub id, or the embedded default before
    its first conversion)."""
    if path in ("default", ""):
        from verl.utils.default_model import DEFAULT_MODEL_NAME, cache_dir

        path = str(cache_dir() / "models" / DEFAULT_MODEL_NAME)
    config_file = os.path.join(os.path.expanduser(path), "config.json")
    if not os.path.isfile(config_file):
        return None
    with open(config_file) as handle:
        return json.load(handle)


def model_heads(path: str) -> tuple[int, int] | None:
    """``(attention heads, KV heads)`` from ``path/config.json`` (its ``text_config`` for a multimodal model)."""
    config = _config_json(path)
    if config is None:
        return None
    config = config.get("text_config") or config
    if "num_attention_heads" not in config:
        return None
    heads = int(config["num_attention_heads"])
    return heads, int(config.get("num_key_value_heads") or heads)


def _role_errors(key: str, sp: int, world: int, use_remove_padding: bool, rmpad_key: str, path: str) -> list[str]:
    if sp <= 1:
        return []
    errors = []
    if world % sp:
        errors.append(
            f"{key}.ulysses_sequence_parallel_size={sp} must divide trainer.n_gpus_per_node * trainer.nnodes = {world}"
        )
    if not use_remove_padding:
        errors.append(
            f"{key}.ulysses_sequence_parallel_size={sp} needs remove-padding (packed sequences are split over the "
            f"group): set {rmpad_key}=True"
        )
    config = _config_json(path)
    if config is not None and config.get("vision_config") is not None:
        errors.append(
            f"{key}.ulysses_sequence_parallel_size={sp}: {path} is a vision-language model, which sequence "
            "parallelism does not support (image features are merged by token position); set it to 1"
        )
    heads = model_heads(path)
    if heads is not None:
        from verl.utils.ulysses import head_split_error  # lazy: verl.utils.ulysses imports torch

        error = head_split_error(*heads, sp, key=f"{key}.ulysses_sequence_parallel_size")
        if error:
            errors.append(f"{error} (model {path})")
    return errors


def sequence_parallel_errors(cfg: PPOConfig, world: int, critic_on: bool, ref_on: bool) -> list[str]:
    """Every sequence-parallel problem of the roles that run."""
    arr = cfg.actor_rollout_ref
    policy_rmpad = "actor_rollout_ref.model.use_remove_padding"
    actor_sp = arr.actor.ulysses_sequence_parallel_size
    errors = _role_errors(
        "actor_rollout_ref.actor", actor_sp, world, arr.model.use_remove_padding, policy_rmpad, arr.model.path
    )
    if ref_on and arr.ref is not None:
        ref_sp = arr.ref.ulysses_sequence_parallel_size
        if arr.model.lora_rank > 0 and ref_sp != actor_sp:
            errors.append(
                f"actor_rollout_ref.ref.ulysses_sequence_parallel_size={ref_sp} differs from the actor's {actor_sp}, "
                "but with LoRA the reference runs on the actor's engine; leave it at its default (the actor's value)"
            )
        if ref_sp != actor_sp:  # an equal value (the YAML's interpolation) is checked once, as the actor's
            errors += _role_errors(
                "actor_rollout_ref.ref", ref_sp, world, arr.model.use_remove_padding, policy_rmpad, arr.model.path
            )
    if critic_on:
        critic = cfg.critic
        errors += _role_errors(
            "critic",
            critic.ulysses_sequence_parallel_size,
            world,
            critic.model.use_remove_padding,
            "critic.model.use_remove_padding",
            critic.model.path,
        )
    return errors

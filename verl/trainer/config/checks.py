"""Cross-field and registry checks of a typed :class:`PPOConfig`, each message naming every key involved.

Batch arithmetic follows the workers: a step generates ``data.train_batch_size * rollout.n`` sequences,
split evenly over ``trainer.n_gpus_per_node * trainer.nnodes`` workers; each optimizer step takes
``ppo_mini_batch_size * rollout.n`` sequences, i.e. ``ppo_mini_batch_size * rollout.n / dp`` per
worker, which ``ppo_micro_batch_size_per_gpu`` must divide (gradient accumulation). ``dp`` is the world size
divided by the role's ``ulysses_sequence_parallel_size`` (the ranks of a sequence-parallel group share rows), and
a token budget ``*_max_token_len_per_gpu`` covers ``budget * ulysses_sequence_parallel_size`` tokens of a
micro-batch.
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

from verl.trainer.config.agent_checks import rollout_mode_errors
from verl.trainer.config.extend import RECIPE_OWNED_ATTR
from verl.trainer.config.megatron_checks import data_parallel_size, megatron_errors, model_parallel_size
from verl.trainer.config.reward_checks import reward_model_errors
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.sequence_parallel import model_heads, sequence_parallel_errors
from verl.trainer.ppo.utils import estimator_inputs, estimator_needs_groups
from verl.workers.config.actor import KL_LOSS_TYPES
from verl.workers.config.base import resolve_registry
from verl.workers.config.reward_model import OverlongBufferConfig
from verl.workers.config.roles import PPOUpdateConfig
from verl.workers.rollout.engine_kwargs import engine_kwargs_errors

CHECKPOINT_CONTENTS = ("model", "optimizer", "extra", "hf_model")
"""Parts a checkpoint may hold."""


def _estimator_registered(cfg: PPOConfig) -> bool:
    from verl.trainer.ppo.algos.registry import ADV_ESTIMATOR_REGISTRY

    return cfg.algorithm.adv_estimator in ADV_ESTIMATOR_REGISTRY


def estimator_needs_critic(cfg: PPOConfig) -> bool:
    """Whether the advantage estimator takes ``values`` (GAE does); false for an unknown name (reported apart)."""
    return _estimator_registered(cfg) and "values" in estimator_inputs(cfg.algorithm.adv_estimator)


def need_critic(cfg: PPOConfig) -> bool:
    """A critic runs when ``critic.enable`` says so, or (when it is null) when the estimator takes ``values``."""
    if cfg.critic.enable is not None:
        return bool(cfg.critic.enable)
    return estimator_needs_critic(cfg)


def need_reference_policy(cfg: PPOConfig) -> bool:
    """The reference policy runs when a KL term uses it (actor KL loss or in-reward KL penalty)."""
    return bool(cfg.actor_rollout_ref.actor.use_kl_loss or cfg.algorithm.use_kl_in_reward)


def _ppo_batch_errors(role: PPOUpdateConfig, key: str, cfg: PPOConfig, world: int) -> list[str]:
    """Mini/micro batch arithmetic of the actor or the critic (``key`` is its config path)."""
    errors = []
    n = cfg.actor_rollout_ref.rollout.n
    batch = cfg.data.train_batch_size
    mini = role.ppo_mini_batch_size
    world_keys = "trainer.n_gpus_per_node * trainer.nnodes"
    sp = role.ulysses_sequence_parallel_size
    if model_parallel_size(role) > 1:  # Megatron: the batch splits over data-parallel ranks only
        world_keys += f" / ({key}.megatron tensor * pipeline parallel size)"
        world = data_parallel_size(role, world)
    elif sp > 1:
        if world % sp:
            return []  # reported by sequence_parallel_errors
        world, world_keys = world // sp, f"{world_keys} / {key}.ulysses_sequence_parallel_size"
    if batch % mini:
        errors.append(
            f"data.train_batch_size={batch} must be a multiple of {key}.ppo_mini_batch_size={mini} (prompts per "
            f"optimizer step); set {key}.ppo_mini_batch_size to a divisor of {batch}"
        )
    mini_sequences = mini * n
    if mini_sequences % world:
        errors.append(
            f"{key}.ppo_mini_batch_size * actor_rollout_ref.rollout.n = {mini}*{n} = {mini_sequences} sequences "
            f"must split evenly over {world_keys} = {world} workers; change one of these keys"
        )
        return errors
    per_worker = mini_sequences // world
    seq_len = cfg.actor_rollout_ref.rollout.prompt_length + cfg.actor_rollout_ref.rollout.response_length
    if role.use_dynamic_bsz:
        if role.ppo_max_token_len_per_gpu * sp < seq_len:
            scaled = f" * ulysses_sequence_parallel_size {sp}" if sp > 1 else ""
            errors.append(
                f"{key}.ppo_max_token_len_per_gpu={role.ppo_max_token_len_per_gpu}{scaled} is below one full "
                f"sequence (actor_rollout_ref.rollout.prompt_length + response_length = {seq_len}); raise it to "
                f">= {-(-seq_len // sp)}"
            )
    elif role.ppo_micro_batch_size_per_gpu is None:
        errors.append(
            f"{key}.ppo_micro_batch_size_per_gpu is null while {key}.use_dynamic_bsz=False; set it to a divisor "
            f"of {per_worker} (ppo_mini_batch_size * rollout.n / world size), or set {key}.use_dynamic_bsz=True"
        )
    elif per_worker % role.ppo_micro_batch_size_per_gpu:
        errors.append(
            f"{key}.ppo_micro_batch_size_per_gpu={role.ppo_micro_batch_size_per_gpu} must divide the per-worker "
            f"mini-batch {key}.ppo_mini_batch_size * actor_rollout_ref.rollout.n / ({world_keys}) = "
            f"{mini}*{n}/{world} = {per_worker}; set it to a divisor of {per_worker}"
        )
    return errors


def _log_prob_errors(
    key: str, micro: int | None, dynamic: bool, max_tokens: int, seq_len: int, sp: int = 1
) -> list[str]:
    if dynamic:
        if max_tokens * sp < seq_len:
            scaled = f" (times ulysses_sequence_parallel_size {sp})" if sp > 1 else ""
            return [
                f"{key}.log_prob_max_token_len_per_gpu={max_tokens}{scaled} is below one full sequence ({seq_len} "
                f"tokens); raise it to >= {-(-seq_len // sp)}"
            ]
    elif micro is None:
        return [
            f"{key}.log_prob_micro_batch_size_per_gpu is null while {key}.log_prob_use_dynamic_bsz=False; "
            "set it (e.g. 8) or enable dynamic batch size"
        ]
    return []


def _length_errors(cfg: PPOConfig) -> list[str]:
    errors = []
    rollout = cfg.actor_rollout_ref.rollout
    key = "actor_rollout_ref.rollout"
    total = rollout.prompt_length + rollout.response_length
    if rollout.max_model_len is not None and total > rollout.max_model_len:
        errors.append(
            f"{key}.prompt_length + {key}.response_length = {rollout.prompt_length}+{rollout.response_length} = "
            f"{total} exceeds the engine context {key}.max_model_len={rollout.max_model_len} (the lengths follow "
            f"data.max_prompt_length and data.max_response_length); lower them or raise max_model_len"
        )
    if rollout.name == "vllm" and not rollout.enable_chunked_prefill and rollout.max_num_batched_tokens < total:
        errors.append(
            f"{key}.max_num_batched_tokens={rollout.max_num_batched_tokens} is below prompt_length + response_length "
            f"= {total} while {key}.enable_chunked_prefill=False; raise it or enable chunked prefill"
        )
    if cfg.data.max_prompt_length > rollout.prompt_length:
        errors.append(
            f"data.max_prompt_length={cfg.data.max_prompt_length} exceeds {key}.prompt_length="
            f"{rollout.prompt_length}; leave {key}.prompt_length at its default (${{data.max_prompt_length}})"
        )
    return errors


def _algorithm_errors(cfg: PPOConfig) -> list[str]:
    errors = []
    algo, actor, rollout = cfg.algorithm, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    if estimator_needs_critic(cfg) and cfg.critic.enable is False:
        errors.append(
            f"algorithm.adv_estimator={algo.adv_estimator} needs a critic but critic.enable=False (the estimator "
            "takes values); set critic.enable=True (or null), or pick an estimator without a critic (grpo, rloo, "
            "reinforce_plus_plus)"
        )
    if cfg.trainer.critic_warmup > 0 and not need_critic(cfg):
        errors.append(
            f"trainer.critic_warmup={cfg.trainer.critic_warmup} but no critic runs (algorithm.adv_estimator="
            f"{algo.adv_estimator}, critic.enable={cfg.critic.enable}); set trainer.critic_warmup=0"
        )
    if need_reference_policy(cfg) and cfg.actor_rollout_ref.ref is None:
        errors.append(
            f"actor_rollout_ref.actor.use_kl_loss={actor.use_kl_loss} / algorithm.use_kl_in_reward="
            f"{algo.use_kl_in_reward} need the reference model, but actor_rollout_ref.ref is null; restore "
            "actor_rollout_ref.ref or turn both KL options off"
        )
    if _estimator_registered(cfg) and estimator_needs_groups(algo.adv_estimator) and rollout.n < 2:
        errors.append(
            f"algorithm.adv_estimator={algo.adv_estimator} compares responses of the same prompt and needs "
            f"actor_rollout_ref.rollout.n > 1 (got {rollout.n}); set actor_rollout_ref.rollout.n=4 or more"
        )
    if (
        _estimator_registered(cfg)
        and "sum_pi_squared" in estimator_inputs(algo.adv_estimator)
        and not actor.calculate_sum_pi_squared
    ):
        errors.append(
            f"algorithm.adv_estimator={algo.adv_estimator} needs sum_v pi^2 per token: set "
            "actor_rollout_ref.actor.calculate_sum_pi_squared=True"
        )
    if actor.kl_loss_type.rstrip("+") not in KL_LOSS_TYPES:
        errors.append(
            f"actor_rollout_ref.actor.kl_loss_type={actor.kl_loss_type!r} is not allowed; allowed values: "
            f"{', '.join(KL_LOSS_TYPES)} (optionally with a trailing '+')"
        )
    if algo.filter_groups.enable and algo.filter_groups.metric is None:
        errors.append(
            "algorithm.filter_groups.enable=True needs algorithm.filter_groups.metric (acc, score, seq_reward, "
            "seq_final_reward)"
        )
    adaptive = actor.adaptive_entropy
    if adaptive.enabled and adaptive.min_ent_coef > adaptive.max_ent_coef:
        errors.append(
            f"actor_rollout_ref.actor.adaptive_entropy.min_ent_coef={adaptive.min_ent_coef} exceeds max_ent_coef="
            f"{adaptive.max_ent_coef}; set min_ent_coef <= max_ent_coef"
        )
    if adaptive.enabled and algo.rollout_correction.bypass_mode:
        errors.append(
            "actor_rollout_ref.actor.adaptive_entropy.enabled needs the policy's entropy, which the old-log-prob pass "
            "computes, but algorithm.rollout_correction.bypass_mode=True skips that pass; turn one of them off"
        )
    correction = algo.rollout_correction
    if (correction.rollout_is or correction.rollout_rs or correction.bypass_mode) and not rollout.calculate_log_probs:
        errors.append(
            "algorithm.rollout_correction (rollout_is/rollout_rs/bypass_mode) needs the engine's log-probs: set "
            "actor_rollout_ref.rollout.calculate_log_probs=True"
        )
    return errors


def _reward_errors(cfg: PPOConfig) -> list[str]:
    errors = []
    buffer_kwargs = cfg.reward_model.reward_kwargs.get("overlong_buffer_cfg")
    valid = set(OverlongBufferConfig().keys())
    if buffer_kwargs is not None:
        unknown = sorted(set(buffer_kwargs) - valid) if isinstance(buffer_kwargs, dict) else ["<not a mapping>"]
        if unknown:
            errors.append(
                f"reward_model.reward_kwargs.overlong_buffer_cfg has unknown keys {unknown}; valid: {sorted(valid)}"
            )
    if cfg.reward_model.launch_reward_fn_async and cfg.algorithm.filter_groups.enable:
        errors.append(
            "reward_model.launch_reward_fn_async=True cannot overlap scoring with the log-prob computations while "
            "algorithm.filter_groups.enable=True (dynamic sampling needs each batch's scores before the next one); "
            "turn one of them off"
        )
    enabled = cfg.reward_model.overlong_buffer.enable or (
        isinstance(buffer_kwargs, dict) and bool(buffer_kwargs.get("enable"))
    )
    if enabled and cfg.reward_model.reward_manager != "dapo":
        errors.append(
            "the overlong buffer (reward_model.overlong_buffer.enable / reward_kwargs.overlong_buffer_cfg.enable) is "
            f"applied by the dapo reward manager only; set reward_model.reward_manager=dapo "
            f"(now {cfg.reward_model.reward_manager!r})"
        )
    return errors


def _is_file_list(value: object, allow_empty: bool) -> bool:
    if isinstance(value, str):
        return allow_empty or bool(value)
    if isinstance(value, list | tuple):
        return (allow_empty or bool(value)) and all(isinstance(v, str) and v for v in value)
    return allow_empty and value is None


def _data_errors(cfg: PPOConfig) -> list[str]:
    errors = []
    if not _is_file_list(cfg.data.train_files, allow_empty=False):
        errors.append(
            f"data.train_files={cfg.data.train_files!r} must be a file path, a list of paths, or 'arithmetic' "
            "(the built-in task)"
        )
    if not _is_file_list(cfg.data.val_files, allow_empty=True):
        errors.append(f"data.val_files={cfg.data.val_files!r} must be a file path, a list of paths, or null")
    target_modules = cfg.actor_rollout_ref.model.target_modules
    if not (isinstance(target_modules, str) or _is_file_list(target_modules, allow_empty=False)):
        errors.append(
            f"actor_rollout_ref.model.target_modules={target_modules!r} must be 'all-linear' or a list of module names"
        )
    return errors


def _rollout_head_errors(cfg: PPOConfig) -> list[str]:
    """The rollout engine splits attention heads over its tensor-parallel ranks as Ulysses does over its group
    (vLLM and SGLang: query heads divided, KV heads divided or replicated); checked from the model's ``config.json``
    when it is on disk, before any engine starts."""
    tp = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size
    path = cfg.actor_rollout_ref.model.path
    heads = model_heads(path) if tp > 1 else None
    if heads is None:
        return []
    from verl.utils.ulysses import head_split_error  # lazy: verl.utils.ulysses imports torch

    error = head_split_error(*heads, tp, key="actor_rollout_ref.rollout.tensor_model_parallel_size")
    return [f"{error} (model {path})"] if error else []


def _trainer_errors(cfg: PPOConfig, world: int) -> list[str]:
    errors = []
    trainer, rollout = cfg.trainer, cfg.actor_rollout_ref.rollout
    if trainer.resume_mode == "resume_path" and not trainer.resume_from_path:
        errors.append("trainer.resume_mode=resume_path needs trainer.resume_from_path (a global_step_N folder)")
    if world % rollout.tensor_model_parallel_size:
        errors.append(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout.tensor_model_parallel_size} must divide "
            f"trainer.n_gpus_per_node * trainer.nnodes = {world}"
        )
    errors += _rollout_head_errors(cfg)
    for key, role in (("actor_rollout_ref.actor", cfg.actor_rollout_ref.actor), ("critic", cfg.critic)):
        for part in ("save_contents", "load_contents"):
            contents = getattr(role.checkpoint, part) or []
            bad = [c for c in contents if c not in CHECKPOINT_CONTENTS]
            if bad:
                errors.append(
                    f"{key}.checkpoint.{part} has unknown parts {bad}; allowed: {', '.join(CHECKPOINT_CONTENTS)}"
                )
    if str(trainer.default_hdfs_dir or "").startswith("hdfs://") and shutil.which("hdfs") is None:
        errors.append(
            f"trainer.default_hdfs_dir={trainer.default_hdfs_dir} needs the Hadoop client: install Hadoop and put its "
            "`hdfs` command on PATH, or give a local folder"
        )
    return errors


def cross_field_errors(cfg: PPOConfig) -> list[str]:
    """Every cross-field inconsistency of ``cfg`` (empty when it is consistent)."""
    from verl.trainer.ppo.placement import placement_errors, pool_world_size

    errors = placement_errors(cfg)
    if errors:
        return errors
    world = pool_world_size(cfg, "actor_rollout")
    rollout, ref = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.ref
    seq_len = rollout.prompt_length + rollout.response_length
    total = cfg.data.train_batch_size * rollout.n
    if total % world:
        errors.append(
            f"data.train_batch_size * actor_rollout_ref.rollout.n = {cfg.data.train_batch_size}*{rollout.n} = {total} "
            f"sequences must split evenly over trainer.n_gpus_per_node * trainer.nnodes = {world} workers; "
            "change one of these keys"
        )
    errors += _ppo_batch_errors(cfg.actor_rollout_ref.actor, "actor_rollout_ref.actor", cfg, world)
    if need_critic(cfg):
        errors += _ppo_batch_errors(cfg.critic, "critic", cfg, pool_world_size(cfg, "critic"))
    errors += _log_prob_errors(
        "actor_rollout_ref.rollout",
        rollout.log_prob_micro_batch_size_per_gpu,
        rollout.log_prob_use_dynamic_bsz,
        rollout.log_prob_max_token_len_per_gpu,
        seq_len,
        cfg.actor_rollout_ref.actor.ulysses_sequence_parallel_size,  # the actor's engine recomputes log-probs
    )
    if ref is not None and need_reference_policy(cfg):
        errors += _log_prob_errors(
            "actor_rollout_ref.ref",
            ref.log_prob_micro_batch_size_per_gpu,
            ref.log_prob_use_dynamic_bsz,
            ref.log_prob_max_token_len_per_gpu,
            seq_len,
            ref.ulysses_sequence_parallel_size,
        )
    errors += _length_errors(cfg)
    errors += sequence_parallel_errors(cfg, world, need_critic(cfg), need_reference_policy(cfg))
    errors += _algorithm_errors(cfg)
    errors += _reward_errors(cfg)
    if "reward_model" not in getattr(type(cfg), RECIPE_OWNED_ATTR, ()):  # PRIME's reward model is its own
        errors += reward_model_errors(cfg)
    errors += _data_errors(cfg)
    errors += _trainer_errors(cfg, world)
    errors += rollout_mode_errors(cfg)
    errors += engine_kwargs_errors(rollout)
    errors += megatron_errors(cfg)
    errors += _kernel_errors(cfg)
    return errors


def _kernel_errors(cfg: PPOConfig) -> list[str]:
    """Liger kernels need CUDA and the liger-kernel package; the fused log-prob head runs without sequence
    parallelism (checked here, before Ray or a model starts)."""
    models = [("actor_rollout_ref.model", cfg.actor_rollout_ref.model)]
    if need_critic(cfg):
        models.append(("critic.model", cfg.critic.model))
    errors = []
    sp = cfg.actor_rollout_ref.actor.ulysses_sequence_parallel_size
    if cfg.actor_rollout_ref.model.use_fused_kernels and sp > 1:
        errors.append(
            f"actor_rollout_ref.model.use_fused_kernels=True does not combine with "
            f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={sp}; set one of them back"
        )
    for key, model in models:
        if model.use_liger:
            # imports torch: only when Liger is asked for, so validation stays torch-free otherwise
            from verl.workers.engine.fsdp.liger import liger_unavailable_reason

            reason = liger_unavailable_reason()
            if reason is not None:
                errors.append(reason.replace("actor_rollout_ref.model", key))
    return errors


def _registry_fields(node: Any, path: str) -> list[tuple[str, Any, str]]:
    """``(key path, value, registry spec)`` of every ``registry_field`` in the typed config tree under ``node``."""
    found = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        key = f"{path}.{f.name}" if path else f.name
        if "registry" in f.metadata:
            found.append((key, value, f.metadata["registry"]))
        elif dataclasses.is_dataclass(value):
            found.extend(_registry_fields(value, key))
    return found


def registry_errors(cfg: PPOConfig) -> list[str]:
    """Names that their registry does not know (listing the registered ones) or that are pinned to a planned
    feature ("not supported yet"), for every ``registry_field`` of the tree. Reading the registries imports no
    heavy module: built-in names are found in source."""
    errors = []
    for key, value, spec in _registry_fields(cfg, ""):
        registry = resolve_registry(spec)
        for name in value if isinstance(value, list) else [value]:
            error = registry.error(name, key)
            if error is not None:
                errors.append(error)
    return errors

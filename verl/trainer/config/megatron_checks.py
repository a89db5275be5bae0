"""Cross-field checks of roles whose ``strategy`` is ``megatron``, run before Ray starts.

* the parallel sizes split the worker group: ``tensor * pipeline`` divides ``n_gpus_per_node * nnodes``; the
  data-parallel size ``world / (tensor * pipeline)`` is what the batch arithmetic divides by;
* roles sharing a worker process (actor, reference, critic, and the reward model unless it has its own resource
  pool) share megatron-core's process groups, so their layouts (tensor, pipeline, virtual pipeline) are equal,
  and the reference runs on the actor's engine kind; a reward model on its own pool splits that pool;
* no LoRA, no sequence parallelism with ``trainer.device=cpu``, and the other engine's settings are untouched;
* when the model folder is on local disk, its architecture is supported and its heads, key/value heads, layers
  and vocabulary divide by the parallel sizes (only ``config.json`` is read).
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import TYPE_CHECKING

from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.megatron import McoreEngineConfig
from verl.workers.config.roles import EngineRoleConfig, FSDPHolderConfig

if TYPE_CHECKING:
    from verl.trainer.config.root import PPOConfig

MEGATRON = "megatron"
LAYOUT_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size")


def model_parallel_size(role: EngineRoleConfig) -> int:
    """Ranks that share one model replica: ``tensor * pipeline`` for Megatron roles, 1 for FSDP."""
    if role.strategy != MEGATRON:
        return 1
    return int(role.megatron.tensor_model_parallel_size) * int(role.megatron.pipeline_model_parallel_size)


def data_parallel_size(role: EngineRoleConfig, world: int) -> int:
    """Data-parallel ranks of ``role`` in a worker group of ``world`` ranks (the divisor of its batch sizes)."""
    return max(1, world // model_parallel_size(role))


def _layout(engine: McoreEngineConfig) -> tuple:
    return tuple(getattr(engine, key) for key in LAYOUT_KEYS)


def _read_model_config(path: str) -> SimpleNamespace | None:
    """``config.json`` of a local model folder (the converted embedded model for ``default``), else None."""
    if path in ("default", ""):
        from verl.utils.default_model import DEFAULT_MODEL_NAME, cache_dir

        path = str(cache_dir() / "models" / DEFAULT_MODEL_NAME)
    config_file = os.path.join(os.path.expanduser(path), "config.json")
    if not os.path.isfile(config_file):
        return None
    with open(config_file) as handle:
        return SimpleNamespace(**json.load(handle))


WORLD_KEYS = "trainer.n_gpus_per_node * trainer.nnodes"


def _role_errors(
    key: str,
    role: EngineRoleConfig,
    model_path: str,
    world: int,
    cuda: bool,
    check_model: bool,
    world_keys: str = WORLD_KEYS,
) -> list[str]:
    from verl.models.mcore.config_converter import ParallelSizes, check_supported

    errors = []
    engine = role.megatron
    tp, pp = engine.tensor_model_parallel_size, engine.pipeline_model_parallel_size
    if world % (tp * pp):
        errors.append(
            f"{key}.megatron.tensor_model_parallel_size * pipeline_model_parallel_size = {tp}*{pp} must divide "
            f"{world_keys} = {world}"
        )
    if engine.sequence_parallel and tp > 1 and not cuda:
        errors.append(
            f"{key}.megatron.sequence_parallel=True needs CUDA (megatron-core allocates its sequence all-gather "
            f"buffers on the GPU); set {key}.megatron.sequence_parallel=False on CPU"
        )
    # the critic keeps its FSDP settings under critic.model
    if isinstance(role, FSDPHolderConfig) and role.fsdp_config != FSDPEngineConfig():
        errors.append(f"{key}.fsdp_config is set but {key}.strategy=megatron; use {key}.megatron.* instead")
    hf_config = _read_model_config(model_path) if check_model else None
    if hf_config is not None:
        sizes = ParallelSizes(tp, pp, engine.virtual_pipeline_model_parallel_size, engine.sequence_parallel)
        errors += [f"{key}.megatron (model {model_path}): {problem}" for problem in check_supported(hf_config, sizes)]
    return errors


def megatron_errors(cfg: PPOConfig) -> list[str]:
    """Every problem with the Megatron roles of ``cfg`` (a typed ``PPOConfig``); empty when none uses Megatron."""
    from verl.trainer.config.checks import need_critic

    arr = cfg.actor_rollout_ref
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    # only an explicit trainer.device=cpu: with ``auto`` the driver may lack the GPUs the workers have (the engine
    # reports sequence parallelism on a CPU worker itself)
    cuda = cfg.trainer.device != "cpu"
    roles = [("actor_rollout_ref.actor", arr.actor, arr.model.path)]
    if arr.ref is not None:
        roles.append(("actor_rollout_ref.ref", arr.ref, arr.model.path))
    if need_critic(cfg):
        roles.append(("critic", cfg.critic, cfg.critic.model.path))
    rm = cfg.reward_model
    own_pool = rm.enable_resource_pool
    if rm.enable and not rm.use_reward_loop:
        roles.append(("reward_model", rm, rm.model.path))
    errors = []
    for key, role, _ in roles:
        if role.strategy != MEGATRON and role.megatron != McoreEngineConfig():
            errors.append(f"{key}.megatron is set but {key}.strategy={role.strategy!r}; set {key}.strategy=megatron")
    megatron_roles = [(key, role, path) for key, role, path in roles if role.strategy == MEGATRON]
    if not megatron_roles:
        return errors
    if arr.ref is not None and (arr.ref.strategy == MEGATRON) != (arr.actor.strategy == MEGATRON):
        errors.append(
            f"actor_rollout_ref.ref.strategy={arr.ref.strategy!r} must match actor_rollout_ref.actor.strategy="
            f"{arr.actor.strategy!r} (the reference runs in the actor's worker)"
        )
    if arr.model.lora_rank > 0 and arr.actor.strategy == MEGATRON:
        errors.append("actor_rollout_ref.model.lora_rank > 0 is not supported with strategy=megatron; use fsdp")
    colocated = [(key, role) for key, role, _ in megatron_roles if not (key == "reward_model" and own_pool)]
    layouts = {key: _layout(role.megatron) for key, role in colocated}
    if len(set(layouts.values())) > 1:
        shown = ", ".join(f"{key}: {layout}" for key, layout in layouts.items())
        errors.append(
            f"Megatron roles share one worker process and so one parallel layout ({', '.join(LAYOUT_KEYS)}); "
            f"got {shown}; make them equal"
        )
    for key, role, path in megatron_roles:
        # the reference loads the actor's model with the actor's layout: checked once, as the actor
        check_model = key != "actor_rollout_ref.ref"
        if key == "reward_model" and own_pool:
            pool_keys = "reward_model.n_gpus_per_node * reward_model.nnodes"
            errors += _role_errors(key, role, path, rm.n_gpus_per_node * rm.nnodes, cuda, check_model, pool_keys)
        else:
            errors += _role_errors(key, role, path, world, cuda, check_model)
    return errors

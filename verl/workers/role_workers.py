"""What the FSDP and Megatron workers share: the roles of ``ActorRolloutRefWorker``, the dispatch mesh names, the
tokenizer loading, and the registered methods that only fill ``meta_info`` from the config and call a role.

A backend module (:mod:`verl.workers.fsdp_workers`, :mod:`verl.workers.megatron_workers`) subclasses
:class:`ActorRolloutRefWorkerBase` and :class:`CriticWorkerBase`, builds its role objects in ``init_model`` and
registers there, for each mesh, which data-parallel rank a worker is and whether its outputs are collected.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import get_nccl_backend
from verl.utils.gc_heap import GcPauses, freeze_after_update, freeze_after_warmup, frozen_objects
from verl.utils.profiler import max_memory_allocated_gb
from verl.workers.actor.roles import log_prob_meta
from verl.workers.config import CriticConfig, HFModelConfig
from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.memory import phase_end_memory

if TYPE_CHECKING:
    from verl.trainer.config.root import ActorRolloutRefConfig

ROLES = {
    "actor": {"actor"},
    "rollout": {"rollout"},
    "ref": {"ref"},
    "actor_rollout": {"actor", "rollout"},
    "actor_rollout_ref": {"actor", "rollout", "ref"},
    "actor_ref": {"actor", "ref"},
}
"""The ``role`` argument of ``ActorRolloutRefWorker`` and the role objects it holds."""

ACTOR_MESH, REF_MESH, ROLLOUT_MESH, CRITIC_MESH, REWARD_MESH = "actor", "ref", "rollout", "critic", "reward_model"


def load_tokenizer(model_config: HFModelConfig):
    """The model's tokenizer (``tokenizer_path`` when set) with a pad token and ``custom_chat_template`` applied;
    the trainer and every worker load it the same way, so prompts and responses are templated alike."""
    from verl.utils.tokenizer import hf_tokenizer

    tokenizer = hf_tokenizer(model_config.local_tokenizer_path, trust_remote_code=model_config.trust_remote_code)
    if model_config.custom_chat_template is not None:
        tokenizer.chat_template = model_config.custom_chat_template
    return tokenizer


def generate_in_rollout_mode(rollout: Any, sharding_manager: BaseShardingManager, prompts: DataProto) -> DataProto:
    """``rollout.generate_sequences(prompts)`` inside ``sharding_manager`` (the policy's weights synced into the
    engine, its memory awake); ``meta_info`` gets the wall times (``timing``: ``generate_sequences`` for the whole,
    ``rollout_call`` for the rollout's own call, without the weight sync and the engine's sleep), the sync's
    ``metrics`` and the garbage collector's pauses during the call (``rollout/gc_*``). A worker that has not frozen its
    long-lived heap after an actor update freezes it at the start of its second training generation
    (:mod:`verl.utils.gc_heap`)."""
    start = time.perf_counter()
    freeze_s = freeze_after_warmup(validate=bool(prompts.meta_info.get("validate", False)))
    with GcPauses() as pauses, sharding_manager:
        prompts = sharding_manager.preprocess_data(prompts)
        call_start = time.perf_counter()
        output = rollout.generate_sequences(prompts)
        call_s = time.perf_counter() - call_start
        output = sharding_manager.postprocess_data(output)
        end_memory = phase_end_memory("gen")  # the engine still awake: its whole footprint
    output.meta_info["timing"] = {"generate_sequences": time.perf_counter() - start, "rollout_call": call_s}
    output.meta_info["metrics"] = {
        **sharding_manager.metrics,
        **pauses.metrics("rollout/"),
        "rollout/gc_freeze_s": freeze_s,
        "rollout/gc_frozen_objects": float(frozen_objects()),
        **end_memory,
    }
    return output


class ActorRolloutRefWorkerBase(Worker):
    """Holds the ``actor``, ``rollout`` and ``ref`` role objects that ``role`` names (:data:`ROLES`).

    ``config`` is the typed ``actor_rollout_ref`` section (``model``, ``actor``, ``rollout``, ``ref``). A subclass
    builds the roles in ``init_model`` and sets ``frozen_policy_role``, the reference role class that a rollout-only
    worker loads as the policy copy it syncs weights from.
    """

    frozen_policy_role: type

    def __init__(self, config: ActorRolloutRefConfig, role: str):
        super().__init__()
        if role not in ROLES:
            raise ValueError(f"unknown ActorRolloutRefWorker role {role!r}; expected one of {sorted(ROLES)}")
        self.config = config
        self.role = role
        self.parts = ROLES[role]
        self.init_process_group(backend=get_nccl_backend(), timeout_s=config.nccl_timeout)
        self.actor = None
        self.ref = None
        self.rollout = None

    def _frozen_policy(self):
        """A rollout-only worker still needs the policy weights to sync from: a frozen copy."""
        self._rollout_source = self.frozen_policy_role(self.config.model, self.config.ref or self.config.actor)
        return self._rollout_source

    def _require(self, part: str, method: str):
        value = getattr(self, part)
        if value is None:
            raise RuntimeError(f"{method} needs the {part!r} role; this worker's role is {self.role!r}")
        return value

    def _phase_metrics(self, key: str, role, phase: str) -> dict[str, Any]:
        """``meta_info`` entry with a forward-only phase's metrics: every backend's roles keep them (MFU) in
        ``last_metrics`` after ``compute_log_prob`` / ``compute_ref_log_prob``; the device's memory in use as the
        trainer's ``phase`` ends (:func:`phase_end_memory`) beside them."""
        return {key: {**role.last_metrics, **phase_end_memory(phase)}}

    def _extra_log_prob_tensors(self, actor, data: DataProto) -> dict[str, Any]:
        """Tensors that ``compute_log_prob`` returns besides ``old_log_probs`` and ``entropys``; none here."""
        return {}

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ROLLOUT_MESH))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self._require("rollout", "generate_sequences").generate_sequences(prompts)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ACTOR_MESH))
    def compute_log_prob(self, data: DataProto) -> DataProto:
        """``old_log_probs`` and ``entropys`` ``(bs, R)`` of the current actor (rollout's log-prob settings)."""
        actor = self._require("actor", "compute_log_prob")
        temperature = float(self.config.rollout.temperature)
        meta = log_prob_meta(self.config.rollout, temperature)
        log_probs, entropys = actor.compute_log_prob(data, meta, calculate_entropy=True)
        tensors = {"old_log_probs": log_probs, "entropys": entropys, **self._extra_log_prob_tensors(actor, data)}
        meta_info = {"temperature": temperature, **self._phase_metrics("actor_infer_metrics", actor, "old_log_prob")}
        return DataProto.from_dict(tensors=tensors, meta_info=meta_info)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=REF_MESH))
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        ref = self._require("ref", "compute_ref_log_prob")
        temperature = float(self.config.rollout.temperature)
        log_probs = ref.compute_ref_log_prob(data, log_prob_meta(self.config.ref, temperature))
        meta_info = {"temperature": temperature, **self._phase_metrics("ref_metrics", ref, "ref")}
        return DataProto.from_dict(tensors={"ref_log_prob": log_probs}, meta_info=meta_info)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ACTOR_MESH))
    def update_actor(self, data: DataProto) -> DataProto:
        actor = self._require("actor", "update_actor")
        data.meta_info.setdefault("temperature", float(self.config.rollout.temperature))
        metrics = {**actor.update(data), **phase_end_memory("update_actor")}
        # the first update returns with everything the loop keeps built: freeze the heap once (verl.utils.gc_heap)
        metrics["actor/gc_freeze_s"] = freeze_after_update()
        return DataProto(meta_info={"metrics": metrics})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        self._require("actor", "save_checkpoint").save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self._require("actor", "load_checkpoint").load_checkpoint(local_path, hdfs_path, del_local_after_load)


class CriticWorkerBase(Worker):
    """Holds a critic role (``compute_values``, ``update``, checkpoints), built by the subclass's ``init_model``.

    ``config`` is the ``critic`` section (``model``, the backend's engine keys, ``optim``, PPO batch keys).
    """

    def __init__(self, config: CriticConfig):
        super().__init__()
        self.config = config
        self.init_process_group(backend=get_nccl_backend())
        self.critic = None

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=CRITIC_MESH))
    def compute_values(self, data: DataProto) -> DataProto:
        values = self.critic.compute_values(data)
        metrics = {**self.critic.last_metrics, **phase_end_memory("values")}
        return DataProto.from_dict(tensors={"values": values}, meta_info={"critic_infer_metrics": metrics})

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=CRITIC_MESH))
    def update_critic(self, data: DataProto) -> DataProto:
        metrics = {**self.critic.update(data), **phase_end_memory("update_critic")}
        metrics.setdefault("perf/max_memory_allocated_gb", max_memory_allocated_gb())
        return DataProto(meta_info={"metrics": metrics})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        self.critic.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self.critic.load_checkpoint(local_path, hdfs_path, del_local_after_load)

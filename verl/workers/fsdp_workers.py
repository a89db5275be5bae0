"""FSDP2 workers for the single controller: ``ActorRolloutRefWorker(config, role)`` and ``CriticWorker(config)``.

A worker is a thin holder of role objects (``ActorRole``, ``ReferenceRole``, ``RolloutRole``, ``CriticRole``),
each usable alone; methods registered here only fill ``meta_info`` from the config and call a role.

Roles of ``ActorRolloutRefWorker``: ``actor``, ``rollout``, ``ref``, ``actor_rollout``, ``actor_rollout_ref``, and
``actor_ref`` (an actor without a rollout engine, as on the trainer pool of the one-step off-policy recipe).
``config`` is the typed ``actor_rollout_ref`` section (``model``, ``actor``, ``rollout``, ``ref``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import get_nccl_backend
from verl.workers.actor.role_utils import max_memory_allocated_gb
from verl.workers.actor.roles import ActorRole, LoraReferenceRole, ReferenceRole, log_prob_meta
from verl.workers.config import CriticConfig, HFModelConfig

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
DP_MESH = "actor"


def load_tokenizer(model_config: HFModelConfig):
    from transformers import AutoTokenizer

    path = model_config.local_tokenizer_path
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=model_config.trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


class RolloutRole:
    """Generation: the rollout engine built by ``build_rollout`` plus its weight-sync manager."""

    def __init__(self, rollout_config, model_config, tokenizer, actor_module, device_mesh=None):
        from verl.workers.rollout import build_rollout

        self.config = rollout_config
        self.rollout, self.sharding_manager = build_rollout(
            rollout_config, model_config, tokenizer, actor_module, device_mesh
        )

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        start = time.perf_counter()
        with self.sharding_manager:
            prompts = self.sharding_manager.preprocess_data(prompts)
            output = self.rollout.generate_sequences(prompts)
            output = self.sharding_manager.postprocess_data(output)
        output.meta_info["timing"] = {"generate_sequences": time.perf_counter() - start}
        output.meta_info["metrics"] = dict(self.sharding_manager.metrics)
        return output


class ActorRolloutRefWorker(Worker):
    def __init__(self, config: ActorRolloutRefConfig, role: str):
        super().__init__()
        if role not in ROLES:
            raise ValueError(f"unknown ActorRolloutRefWorker role {role!r}; expected one of {sorted(ROLES)}")
        self.config = config
        self.role = role
        self.parts = ROLES[role]
        self.init_process_group(backend=get_nccl_backend())
        self.actor: ActorRole | None = None
        self.ref: ReferenceRole | LoraReferenceRole | None = None
        self.rollout: RolloutRole | None = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        """Build the roles: the actor first (the rollout reads its weights), the reference last."""
        model_config = self.config.model
        self.tokenizer = load_tokenizer(model_config)
        self._register_dispatch_collect_info(DP_MESH, dp_rank=self.rank, is_collect=True)
        if "actor" in self.parts:
            self.actor = ActorRole(model_config, self.config.actor, self.tokenizer, self.config.rollout.n)
        if "rollout" in self.parts:
            source = self.actor.module if self.actor is not None else self._frozen_policy().engine.module
            self.rollout = RolloutRole(self.config.rollout, model_config, self.tokenizer, source)
        if "ref" in self.parts:
            if self.actor is not None and int(model_config.lora_rank) > 0:
                self.ref = LoraReferenceRole(self.actor, self.config.ref)
            else:
                self.ref = ReferenceRole(model_config, self.config.ref)

    def _frozen_policy(self) -> ReferenceRole:
        """A rollout-only worker still needs the policy weights to sync from: a frozen copy."""
        self._rollout_source = ReferenceRole(self.config.model, self.config.ref or self.config.actor)
        return self._rollout_source

    def _require(self, part: str, method: str):
        value = getattr(self, part)
        if value is None:
            raise RuntimeError(f"{method} needs the {part!r} role; this worker's role is {self.role!r}")
        return value

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self._require("rollout", "generate_sequences").generate_sequences(prompts)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def compute_log_prob(self, data: DataProto) -> DataProto:
        """``old_log_probs`` and ``entropys`` ``(bs, R)`` of the current actor (rollout's log-prob settings)."""
        actor = self._require("actor", "compute_log_prob")
        temperature = float(self.config.rollout.temperature)
        meta = log_prob_meta(self.config.rollout, temperature)
        log_probs, entropys = actor.compute_log_prob(data, meta, calculate_entropy=True)
        return DataProto.from_dict(
            tensors={"old_log_probs": log_probs, "entropys": entropys}, meta_info={"temperature": temperature}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        ref = self._require("ref", "compute_ref_log_prob")
        temperature = float(self.config.rollout.temperature)
        log_probs = ref.compute_ref_log_prob(data, log_prob_meta(self.config.ref, temperature))
        return DataProto.from_dict(tensors={"ref_log_prob": log_probs}, meta_info={"temperature": temperature})

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def update_actor(self, data: DataProto) -> DataProto:
        actor = self._require("actor", "update_actor")
        data.meta_info.setdefault("temperature", float(self.config.rollout.temperature))
        metrics = actor.update(data)
        return DataProto(meta_info={"metrics": metrics})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        self._require("actor", "save_checkpoint").save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self._require("actor", "load_checkpoint").load_checkpoint(local_path, hdfs_path, del_local_after_load)


class CriticWorker(Worker):
    """``config`` is the ``critic`` section (``model`` with ``fsdp_config``, ``optim``, PPO batch keys)."""

    def __init__(self, config: CriticConfig):
        super().__init__()
        self.config = config
        self.init_process_group(backend=get_nccl_backend())
        self.critic = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.critic.role import CriticRole

        self._register_dispatch_collect_info(DP_MESH, dp_rank=self.rank, is_collect=True)
        self.critic = CriticRole(self.config, load_tokenizer(self.config.model))

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def compute_values(self, data: DataProto) -> DataProto:
        return DataProto.from_dict(tensors={"values": self.critic.compute_values(data)})

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=DP_MESH))
    def update_critic(self, data: DataProto) -> DataProto:
        metrics = self.critic.update(data)
        metrics.setdefault("perf/max_memory_allocated_gb", max_memory_allocated_gb())
        return DataProto(meta_info={"metrics": metrics})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        self.critic.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self.critic.load_checkpoint(local_path, hdfs_path, del_local_after_load)

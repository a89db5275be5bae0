"""Megatron workers for the single controller: ``ActorRolloutRefWorker(config, role)``, ``CriticWorker(config)``
and ``RewardModelWorker(config)`` (the engine-independent reward-model worker; its role builds the Megatron scorer).

Same registered methods, arguments and outputs as :mod:`verl.workers.fsdp_workers`; the trainer picks one module or
the other by ``strategy`` (:mod:`verl.workers.worker_registry`). Two dispatch meshes:

* ``actor``: training and log-prob calls are split over the **data-parallel** ranks of megatron-core's layout;
  tensor- and pipeline-parallel peers receive the same rows, and only tensor rank 0 of the last pipeline stage is
  collected (its outputs are the group's);
* ``rollout``: generation is split over every rank, as with FSDP (the rollout's own tensor parallelism is the
  rollout engine's business: it receives full weights).
"""

from __future__ import annotations

import time

from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import get_nccl_backend
from verl.workers.actor.megatron_roles import MegatronActorRole, MegatronReferenceRole
from verl.workers.actor.role_utils import max_memory_allocated_gb
from verl.workers.actor.roles import log_prob_meta
from verl.workers.fsdp_workers import ROLES, RewardModelWorker, load_tokenizer
from verl.workers.worker_registry import WorkerClasses, register_workers

TRAIN_MESH = "actor"
ROLLOUT_MESH = "rollout"


class MegatronRolloutRole:
    """Generation: a rollout engine plus the sharding manager that streams the Megatron engine's weights into it."""

    def __init__(self, rollout_config, model_config, tokenizer, engine):
        from verl.workers.sharding_manager.megatron import build_megatron_rollout

        self.config = rollout_config
        self.rollout, self.sharding_manager = build_megatron_rollout(rollout_config, model_config, tokenizer, engine)

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
    def __init__(self, config, role: str):
        super().__init__()
        if role not in ROLES:
            raise ValueError(f"unknown ActorRolloutRefWorker role {role!r}; expected one of {sorted(ROLES)}")
        self.config = config
        self.role = role
        self.parts = ROLES[role]
        self.init_process_group(backend=get_nccl_backend())
        self.actor: MegatronActorRole | None = None
        self.ref: MegatronReferenceRole | None = None
        self.rollout: MegatronRolloutRole | None = None

    @property
    def _rollout_n(self) -> int:
        return int(self.config.rollout.n)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        """Build the roles: the actor first (the rollout reads its weights), the reference last."""
        model_config = self.config.model
        self.tokenizer = load_tokenizer(model_config)
        if "actor" in self.parts:
            self.actor = MegatronActorRole(model_config, self.config.actor, self.tokenizer, self._rollout_n)
        if "rollout" in self.parts:
            source = self.actor if self.actor is not None else self._frozen_policy()
            self.rollout = MegatronRolloutRole(self.config.rollout, model_config, self.tokenizer, source.engine)
        if "ref" in self.parts:
            self.ref = MegatronReferenceRole(model_config, self.config.ref)
        engine = (self.actor or self.ref or self._rollout_source).engine
        self._register_dispatch_collect_info(TRAIN_MESH, dp_rank=engine.dp_rank, is_collect=engine.is_collect_rank)
        self._register_dispatch_collect_info(ROLLOUT_MESH, dp_rank=self.rank, is_collect=True)

    def _frozen_policy(self) -> MegatronReferenceRole:
        """A rollout-only worker still needs the policy weights to sync from: a frozen copy."""
        self._rollout_source = MegatronReferenceRole(self.config.model, self.config.ref or self.config.actor)
        return self._rollout_source

    def _require(self, part: str, method: str):
        value = getattr(self, part)
        if value is None:
            raise RuntimeError(f"{method} needs the {part!r} role; this worker's role is {self.role!r}")
        return value

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ROLLOUT_MESH))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self._require("rollout", "generate_sequences").generate_sequences(prompts)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TRAIN_MESH))
    def compute_log_prob(self, data: DataProto) -> DataProto:
        """``old_log_probs`` and ``entropys`` ``(bs, R)`` of the current actor (rollout's log-prob settings)."""
        actor = self._require("actor", "compute_log_prob")
        temperature = float(self.config.rollout.temperature)
        meta = log_prob_meta(self.config.rollout, temperature)
        log_probs, entropys = actor.compute_log_prob(data, meta, calculate_entropy=True)
        return DataProto.from_dict(
            tensors={"old_log_probs": log_probs, "entropys": entropys}, meta_info={"temperature": temperature}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TRAIN_MESH))
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        ref = self._require("ref", "compute_ref_log_prob")
        temperature = float(self.config.rollout.temperature)
        log_probs = ref.compute_ref_log_prob(data, log_prob_meta(self.config.ref, temperature))
        return DataProto.from_dict(tensors={"ref_log_prob": log_probs}, meta_info={"temperature": temperature})

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TRAIN_MESH))
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
    """``config`` is the ``critic`` section (``model``, ``megatron``, ``optim``, PPO batch keys)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.init_process_group(backend=get_nccl_backend())
        self.critic = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.critic.megatron_role import MegatronCriticRole

        self.critic = MegatronCriticRole(self.config, load_tokenizer(self.config.model))
        engine = self.critic.engine
        self._register_dispatch_collect_info(TRAIN_MESH, dp_rank=engine.dp_rank, is_collect=engine.is_collect_rank)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TRAIN_MESH))
    def compute_values(self, data: DataProto) -> DataProto:
        values = self.critic.compute_values(data)
        return DataProto.from_dict(
            tensors={"values": values}, meta_info={"critic_infer_metrics": self.critic.last_metrics}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TRAIN_MESH))
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


@register_workers("megatron")
def megatron_workers() -> WorkerClasses:
    """The workers of ``strategy=megatron``."""
    return WorkerClasses(actor_rollout_ref=ActorRolloutRefWorker, critic=CriticWorker, reward_model=RewardModelWorker)

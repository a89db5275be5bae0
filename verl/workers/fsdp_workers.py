"""FSDP2 workers for the single controller: ``ActorRolloutRefWorker(config, role)``, ``CriticWorker(config)`` and
``RewardModelWorker(config)``.

A worker is a thin holder of role objects (``ActorRole``, ``ReferenceRole``, ``RolloutRole``, ``CriticRole``),
each usable alone; methods registered here only fill ``meta_info`` from the config and call a role.

Data dispatch is mesh-aware: each role's methods are split by that role's data-parallel rank (the ``dp``
coordinate of its engine's ``(dp, sp)`` Ulysses mesh), so the ranks of a sequence-parallel group get the same
rows and only the first of them is collected.

Roles of ``ActorRolloutRefWorker``: ``actor``, ``rollout``, ``ref``, ``actor_rollout``, ``actor_rollout_ref``, and
``actor_ref`` (an actor without a rollout engine, as on the trainer pool of the one-step off-policy recipe).
``config`` is the typed ``actor_rollout_ref`` section (``model``, ``actor``, ``rollout``, ``ref``).
Forward-only phases put their metrics (MFU) in ``meta_info`` under a key of their own
(``actor_infer_metrics``, ``ref_metrics``, ``critic_infer_metrics``), so outputs of several phases still union.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import ray

from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import get_nccl_backend
from verl.workers.actor.role_utils import max_memory_allocated_gb
from verl.workers.actor.roles import ActorRole, LoraReferenceRole, ReferenceRole, log_prob_meta
from verl.workers.config import CriticConfig, HFModelConfig, RewardModelConfig
from verl.workers.engine.fsdp.ulysses import UlyssesMesh
from verl.workers.worker_registry import WorkerClasses, register_workers

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
ACTOR_MESH, REF_MESH, ROLLOUT_MESH, CRITIC_MESH, REWARD_MESH = "actor", "ref", "rollout", "critic", "reward_model"
ROLLOUT_SERVER_GROUP = "rollout_server"
"""Ray concurrency group of ``generate``: agent loops' requests run side by side, the training calls stay serial."""


def register_ulysses_dispatch(worker: Worker, mesh_name: str, mesh: UlyssesMesh) -> None:
    """Dispatch ``mesh_name``'s methods by the ``dp`` coordinate; collect the first rank of each ``sp`` group."""
    worker._register_dispatch_collect_info(mesh_name, dp_rank=mesh.dp_rank, is_collect=mesh.is_collect)


def load_tokenizer(model_config: HFModelConfig):
    """The model's tokenizer (``tokenizer_path`` when set) with a pad token and ``custom_chat_template`` applied;
    the trainer and every worker load it the same way, so prompts and responses are templated alike."""
    from verl.utils.tokenizer import hf_tokenizer

    tokenizer = hf_tokenizer(model_config.local_tokenizer_path, trust_remote_code=model_config.trust_remote_code)
    if model_config.custom_chat_template is not None:
        tokenizer.chat_template = model_config.custom_chat_template
    return tokenizer


class RolloutRole:
    """Generation: the rollout engine built by ``build_rollout`` plus its weight-sync manager, and with
    ``rollout.mode=async`` the request server around the engine (:mod:`verl.workers.rollout.async_server`)."""

    def __init__(self, rollout_config, model_config, tokenizer, actor_module, device_mesh=None):
        from verl.workers.rollout import build_rollout
        from verl.workers.rollout.async_server import get_async_server_class

        self.config = rollout_config
        self.rollout, self.sharding_manager = build_rollout(
            rollout_config, model_config, tokenizer, actor_module, device_mesh
        )
        self.server = None
        if rollout_config.mode == "async":
            self.server = get_async_server_class(rollout_config.name)(self.rollout)

    def _require_server(self):
        if self.server is None:
            raise RuntimeError("wake_up / sleep / generate serve agent loops: set actor_rollout_ref.rollout.mode=async")
        return self.server

    def wake_up(self) -> dict[str, float]:
        """Enter rollout mode (weights synced, engine awake) and start serving; returns the sync metrics."""
        server = self._require_server()
        self.sharding_manager.__enter__()
        server.start()
        return dict(self.sharding_manager.metrics)

    def sleep(self) -> dict[str, float]:
        """Stop serving and leave rollout mode (engine memory released); returns the memory metrics."""
        self._require_server().stop()
        self.sharding_manager.__exit__(None, None, None)
        return dict(self.sharding_manager.metrics)

    def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str):
        return self._require_server().generate(prompt_ids, sampling_params, request_id)

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
    ray_concurrency_groups = {ROLLOUT_SERVER_GROUP: 1024}
    """Threads for concurrent ``generate`` calls (created on demand by Ray)."""

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
        self._register_dispatch_collect_info(ROLLOUT_MESH, dp_rank=self.rank, is_collect=True)
        if "actor" in self.parts:
            self.actor = ActorRole(model_config, self.config.actor, self.tokenizer, self.config.rollout.n)
            register_ulysses_dispatch(self, ACTOR_MESH, self.actor.engine.ulysses)
        if "rollout" in self.parts:
            source = self.actor.module if self.actor is not None else self._frozen_policy().engine.module
            self.rollout = RolloutRole(self.config.rollout, model_config, self.tokenizer, source)
        if "ref" in self.parts:
            if self.actor is not None and int(model_config.lora_rank) > 0:
                self.ref = LoraReferenceRole(self.actor, self.config.ref)
                register_ulysses_dispatch(self, REF_MESH, self.actor.engine.ulysses)
            else:
                self.ref = ReferenceRole(model_config, self.config.ref)
                register_ulysses_dispatch(self, REF_MESH, self.ref.engine.ulysses)

    def _frozen_policy(self) -> ReferenceRole:
        """A rollout-only worker still needs the policy weights to sync from: a frozen copy."""
        self._rollout_source = ReferenceRole(self.config.model, self.config.ref or self.config.actor)
        return self._rollout_source

    def _require(self, part: str, method: str):
        value = getattr(self, part)
        if value is None:
            raise RuntimeError(f"{method} needs the {part!r} role; this worker's role is {self.role!r}")
        return value

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ROLLOUT_MESH))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self._require("rollout", "generate_sequences").generate_sequences(prompts)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def wake_up(self) -> dict[str, float]:
        """``rollout.mode=async``: sync the actor's weights into the engine and start its request server."""
        return self._require("rollout", "wake_up").wake_up()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def sleep(self) -> dict[str, float]:
        """``rollout.mode=async``: stop the request server and give the engine's memory back to training."""
        return self._require("rollout", "sleep").sleep()

    @register(dispatch_mode=Dispatch.DIRECT_ROLLOUT_METHOD)
    @ray.method(concurrency_group=ROLLOUT_SERVER_GROUP)
    def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str):
        """One model turn (a ``TokenOutput``) on this replica; agent loops call the tensor-parallel leader directly."""
        return self._require("rollout", "generate").generate(prompt_ids, sampling_params, request_id)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ACTOR_MESH))
    def compute_log_prob(self, data: DataProto) -> DataProto:
        """``old_log_probs`` and ``entropys`` ``(bs, R)`` of the current actor (rollout's log-prob settings)."""
        actor = self._require("actor", "compute_log_prob")
        temperature = float(self.config.rollout.temperature)
        meta = log_prob_meta(self.config.rollout, temperature)
        log_probs, entropys = actor.compute_log_prob(data, meta, calculate_entropy=True)
        tensors = {"old_log_probs": log_probs, "entropys": entropys}
        if self.config.actor.calculate_sum_pi_squared:
            tensors["sum_pi_squared"] = actor.actor.compute_sum_pi_squared(data)
        return DataProto.from_dict(
            tensors=tensors, meta_info={"temperature": temperature, "actor_infer_metrics": actor.last_metrics}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=REF_MESH))
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        ref = self._require("ref", "compute_ref_log_prob")
        temperature = float(self.config.rollout.temperature)
        log_probs = ref.compute_ref_log_prob(data, log_prob_meta(self.config.ref, temperature))
        return DataProto.from_dict(
            tensors={"ref_log_prob": log_probs}, meta_info={"temperature": temperature, "ref_metrics": ref.last_metrics}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ACTOR_MESH))
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

        self.critic = CriticRole(self.config, load_tokenizer(self.config.model))
        register_ulysses_dispatch(self, CRITIC_MESH, self.critic.engine.ulysses)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=CRITIC_MESH))
    def compute_values(self, data: DataProto) -> DataProto:
        values = self.critic.compute_values(data)
        return DataProto.from_dict(
            tensors={"values": values}, meta_info={"critic_infer_metrics": self.critic.last_metrics}
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=CRITIC_MESH))
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


class RewardModelWorker(Worker):
    """``config`` is the ``reward_model`` section; holds a ``RewardModelRole`` (frozen scorer, no checkpoints) on the
    engine of ``reward_model.strategy``. A batch is split over the scorer's data-parallel ranks (every rank with
    FSDP2; with Megatron, tensor- and pipeline-parallel peers get the same rows and one of them is collected)."""

    def __init__(self, config: RewardModelConfig):
        super().__init__()
        self.config = config
        self.init_process_group(backend=get_nccl_backend())
        self.reward_model = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.reward_model.role import RewardModelRole

        self.reward_model = RewardModelRole(self.config)
        scorer = self.reward_model.scorer
        self._register_dispatch_collect_info(REWARD_MESH, dp_rank=scorer.dp_rank, is_collect=scorer.is_collect_rank)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=REWARD_MESH))
    def compute_rm_score(self, data: DataProto) -> DataProto:
        """``rm_scores (bs, R)``: the reward model's score at each response's last token."""
        return self.reward_model.compute_rm_score(data)


@register_workers("fsdp")
@register_workers("fsdp2")
def fsdp_workers() -> WorkerClasses:
    """The workers of ``strategy=fsdp`` / ``fsdp2``."""
    return WorkerClasses(actor_rollout_ref=ActorRolloutRefWorker, critic=CriticWorker, reward_model=RewardModelWorker)

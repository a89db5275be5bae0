"""FSDP2 workers for the single controller: ``ActorRolloutRefWorker(config, role)``, ``CriticWorker(config)`` and
``RewardModelWorker(config)``.

A worker is a thin holder of role objects (``ActorRole``, ``ReferenceRole``, ``RolloutRole``, ``CriticRole``),
each usable alone; registered methods only fill ``meta_info`` from the config and call a role (those shared with
the Megatron workers are in :mod:`verl.workers.role_workers`).

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

from typing import Any

import ray

from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import get_nccl_backend
from verl.workers.actor.roles import ActorRole, LoraReferenceRole, ReferenceRole
from verl.workers.config import RewardModelConfig
from verl.workers.engine.fsdp.ulysses import UlyssesMesh
from verl.workers.role_workers import (
    ACTOR_MESH,
    CRITIC_MESH,
    REF_MESH,
    REWARD_MESH,
    ROLLOUT_MESH,
    ActorRolloutRefWorkerBase,
    CriticWorkerBase,
    generate_in_rollout_mode,
    load_tokenizer,
)
from verl.workers.worker_registry import WorkerClasses, register_workers

ROLLOUT_SERVER_GROUP = "rollout_server"
"""Ray concurrency group of ``generate``: agent loops' requests run side by side, the training calls stay serial."""


def register_ulysses_dispatch(worker: Worker, mesh_name: str, mesh: UlyssesMesh) -> None:
    """Dispatch ``mesh_name``'s methods by the ``dp`` coordinate; collect the first rank of each ``sp`` group."""
    worker._register_dispatch_collect_info(mesh_name, dp_rank=mesh.dp_rank, is_collect=mesh.is_collect)


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
        return generate_in_rollout_mode(self.rollout, self.sharding_manager, prompts)


class ActorRolloutRefWorker(ActorRolloutRefWorkerBase):
    ray_concurrency_groups = {ROLLOUT_SERVER_GROUP: 1024}
    """Threads for concurrent ``generate`` calls of the agent loops. Ray starts all of them with the actor (1024 idle
    threads in every worker process, whether or not the rollout runs in async mode; seen in session 8)."""

    frozen_policy_role = ReferenceRole
    actor: ActorRole | None
    ref: ReferenceRole | LoraReferenceRole | None
    rollout: RolloutRole | None

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

    def _extra_log_prob_tensors(self, actor: ActorRole, data: DataProto) -> dict[str, Any]:
        if not self.config.actor.calculate_sum_pi_squared:
            return {}
        return {"sum_pi_squared": actor.actor.compute_sum_pi_squared(data)}

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


class CriticWorker(CriticWorkerBase):
    """``config`` is the ``critic`` section (``model`` with ``fsdp_config``, ``optim``, PPO batch keys)."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.critic.role import CriticRole

        self.critic = CriticRole(self.config, load_tokenizer(self.config.model))
        register_ulysses_dispatch(self, CRITIC_MESH, self.critic.engine.ulysses)


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

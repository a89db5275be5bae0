"""Megatron workers for the single controller: ``ActorRolloutRefWorker(config, role)``, ``CriticWorker(config)``
and ``RewardModelWorker(config)`` (the engine-independent reward-model worker; its role builds the Megatron scorer).

Same registered methods, arguments and outputs as :mod:`verl.workers.fsdp_workers`; the trainer picks one module or
the other by ``strategy`` (:mod:`verl.workers.worker_registry`). Two dispatch meshes:

* ``actor``, ``ref`` and ``critic``: training and log-prob calls are split over the **data-parallel** ranks of
  megatron-core's layout; tensor- and pipeline-parallel peers receive the same rows, and only tensor rank 0 of the
  last pipeline stage is collected (its outputs are the group's);
* ``rollout``: generation is split over every rank, as with FSDP (the rollout's own tensor parallelism is the
  rollout engine's business: it receives full weights).
"""

from __future__ import annotations

from verl.protocol import DataProto
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.actor.megatron_roles import MegatronActorRole, MegatronReferenceRole
from verl.workers.fsdp_workers import RewardModelWorker
from verl.workers.role_workers import (
    ACTOR_MESH,
    CRITIC_MESH,
    REF_MESH,
    ROLLOUT_MESH,
    ActorRolloutRefWorkerBase,
    CriticWorkerBase,
    generate_in_rollout_mode,
    load_tokenizer,
)
from verl.workers.worker_registry import WorkerClasses, register_workers


class MegatronRolloutRole:
    """Generation: a rollout engine plus the sharding manager that streams the Megatron engine's weights into it."""

    def __init__(self, rollout_config, model_config, tokenizer, engine):
        from verl.workers.sharding_manager.megatron import build_megatron_rollout

        self.config = rollout_config
        self.rollout, self.sharding_manager = build_megatron_rollout(rollout_config, model_config, tokenizer, engine)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return generate_in_rollout_mode(self.rollout, self.sharding_manager, prompts)


class ActorRolloutRefWorker(ActorRolloutRefWorkerBase):
    frozen_policy_role = MegatronReferenceRole
    actor: MegatronActorRole | None
    ref: MegatronReferenceRole | None
    rollout: MegatronRolloutRole | None

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
        # the actor and the reference share one megatron-core layout: same data-parallel rank, same collected rank
        engine = (self.actor or self.ref or self._rollout_source).engine
        for mesh in (ACTOR_MESH, REF_MESH):
            self._register_dispatch_collect_info(mesh, dp_rank=engine.dp_rank, is_collect=engine.is_collect_rank)
        self._register_dispatch_collect_info(ROLLOUT_MESH, dp_rank=self.rank, is_collect=True)


class CriticWorker(CriticWorkerBase):
    """``config`` is the ``critic`` section (``model``, ``megatron``, ``optim``, PPO batch keys)."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.critic.megatron_role import MegatronCriticRole

        self.critic = MegatronCriticRole(self.config, load_tokenizer(self.config.model))
        engine = self.critic.engine
        self._register_dispatch_collect_info(CRITIC_MESH, dp_rank=engine.dp_rank, is_collect=engine.is_collect_rank)


@register_workers("megatron")
def megatron_workers() -> WorkerClasses:
    """The workers of ``strategy=megatron``."""
    return WorkerClasses(actor_rollout_ref=ActorRolloutRefWorker, critic=CriticWorker, reward_model=RewardModelWorker)

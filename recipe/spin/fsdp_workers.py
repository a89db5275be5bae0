"""SPIN's worker: :class:`~verl.workers.fsdp_workers.ActorRolloutRefWorker` (role ``actor_rollout_ref``) whose actor
update is the self-play pair loss, and whose reference can be reset to the actor (the next SPIN iteration)."""

from __future__ import annotations

import torch

from recipe.spin.dp_actor import SPINActor
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.actor.role_utils import with_fields
from verl.workers.fsdp_workers import ActorRolloutRefWorker

__all__ = ["SPINWorker"]


class SPINWorker(ActorRolloutRefWorker):
    """``config`` is the whole SPIN config: the worker holds ``actor_rollout_ref`` (actor, rollout and reference)
    and the loss reads ``algorithm.dpo_*``."""

    def __init__(self, config):
        super().__init__(config.actor_rollout_ref, "actor_rollout_ref")
        self.spin = config.algorithm

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        super().init_model()
        role = self._require("actor", "init_model")
        self._require("ref", "init_model")
        # every prompt sample is a pair of rows: the per-rank mini-batch holds twice the rows
        config = with_fields(role.config, ppo_mini_batch_size=2 * int(role.config.ppo_mini_batch_size))
        role.actor = SPINActor(
            config,
            role.engine.forward_module,
            role.engine.optimizer,
            self.spin,
            use_remove_padding=bool(self.config.model.use_remove_padding),
            ulysses=role.engine.ulysses,
        )

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def update_ref_from_actor(self) -> None:
        """p_θt <- p_θ: copy the actor's weights into the reference, shard by shard (same FSDP layout, no
        collective)."""
        actor_state = self.actor.engine.module.state_dict()
        ref_state = self.ref.engine.module.state_dict()
        missing = sorted(set(ref_state) - set(actor_state))
        if missing:
            raise RuntimeError(f"the reference has weights the actor lacks: {missing[:4]}")
        with torch.no_grad():
            for name, tensor in ref_state.items():
                tensor.copy_(actor_state[name])

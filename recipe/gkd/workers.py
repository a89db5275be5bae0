"""The student's worker: :class:`~verl.workers.fsdp_workers.ActorRolloutRefWorker` whose actor update is
:class:`~recipe.gkd.distill_actor.DistillActor`."""

from __future__ import annotations

from recipe.gkd.distill_actor import DistillActor
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.fsdp_workers import ActorRolloutRefWorker


class StudentWorker(ActorRolloutRefWorker):
    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        super().init_model()
        role = self._require("actor", "init_model")
        role.actor = DistillActor(
            role.config,
            role.engine.forward_module,
            role.engine.optimizer,
            self.config.actor.distill,
            use_remove_padding=bool(self.config.model.use_remove_padding),
        )

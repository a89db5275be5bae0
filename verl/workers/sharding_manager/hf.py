"""Manager for the ``hf`` rollout: the rollout generates with the actor's module, so nothing is copied."""

from __future__ import annotations

from torch import nn

from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.memory import memory_metrics


class HFShardingManager(BaseShardingManager):
    """Switches the shared module to eval mode for generation and back to its previous mode afterwards.

    ``timing_s/update_weights`` is 0: the weights already are the actor's.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self._was_training = module.training

    def enter_rollout_mode(self) -> None:
        self._was_training = self.module.training
        self.module.eval()
        self.metrics["timing_s/update_weights"] = 0.0
        self.metrics.update(memory_metrics("rollout"))

    def exit_rollout_mode(self) -> None:
        self.module.train(self._was_training)
        self.metrics.update(memory_metrics("training"))

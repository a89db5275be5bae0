"""Manager for the ``hf`` rollout: the rollout generates with the actor's module, so nothing is copied."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from verl.workers.engine.fsdp.sharding import fsdp_modules, param_groups
from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.memory import memory_metrics


def _reshard_settings(module: nn.Module) -> list[tuple[Any, str, Any]]:
    """``(object, attribute, value)`` of everything ``FSDPModule.set_reshard_after_forward`` changes, so that it can
    be put back exactly (the root module's automatic "keep after forward" included)."""
    state = module._get_fsdp_state()
    settings = [(group, "post_forward_mesh_info", group.post_forward_mesh_info) for group in param_groups(module)]
    if hasattr(state, "_auto_reshard_after_forward"):
        settings.append((state, "_auto_reshard_after_forward", state._auto_reshard_after_forward))
    return settings


class HFShardingManager(BaseShardingManager):
    """Switches the shared module to eval mode for generation and back to its previous mode afterwards.

    On an FSDP2-sharded module it also keeps the parameters gathered for the whole generation: FSDP2 would otherwise
    all-gather every layer's parameters in each of the ``R`` decode forwards and free them again after it. The
    first forward gathers them; on leaving, the module's ``reshard_after_forward`` settings are put back and every
    module is resharded, so training sees the module as it was. The gathered parameters (in FSDP's ``param_dtype``)
    stay in memory during generation, as verl's ``hf`` rollout holds its FSDP1 parameters with
    ``summon_full_params``. Every rank enters and leaves together (the rollout already runs the same number of
    forwards on every rank).

    Generation runs the module eagerly (``torch.compiler.set_stance("force_eager")`` until leaving): the actor's
    decoder layers are compiled for training (``use_torch_compile``), and a decode step's key/value cache changes
    what the compiled forward guards on (each layer's cache is filled on its first call, the lengths grow), so
    compiled generation recompiled layer after layer until dynamo's recompile limit: on an H200 one step's HF
    generation took 149 s with the GPU idle (session 6), against 14 s eager.

    ``timing_s/update_weights`` is 0: the weights already are the actor's.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self._was_training = module.training
        self._saved: list[tuple[Any, str, Any]] = []
        self._eager = contextlib.ExitStack()

    def enter_rollout_mode(self) -> None:
        self._was_training = self.module.training
        self.module.eval()
        self._eager.enter_context(torch.compiler.set_stance("force_eager"))
        for sub in fsdp_modules(self.module):
            self._saved.extend(_reshard_settings(sub))
            sub.set_reshard_after_forward(False, recurse=False)
        self.metrics["timing_s/update_weights"] = 0.0
        self.metrics.update(memory_metrics("rollout"))

    def exit_rollout_mode(self) -> None:
        for owner, name, value in self._saved:
            setattr(owner, name, value)
        self._saved.clear()
        for sub in fsdp_modules(self.module):
            sub.reshard()
        self.module.train(self._was_training)
        self._eager.close()
        self.metrics.update(memory_metrics("training"))

"""The Megatron engine's optimizer (AdamW, optionally ZeRO-1) and moving parameters or optimizer state off the device.

AdamW (decoupled weight decay, Loshchilov & Hutter 2019) over this rank's parameter shards. With
``use_distributed_optimizer`` and more than one data-parallel rank the state is sharded over the data-parallel
group with ``torch.distributed.optim.ZeroRedundancyOptimizer`` (ZeRO stage 1, Rajbhandari et al. 2020): each rank
keeps the Adam moments of a subset of the parameters, steps them, and broadcasts the updated parameters.
"""

from __future__ import annotations

import torch

from verl.workers.config import OptimConfig
from verl.workers.engine.megatron.parallel import Ranks


def build_optimizer(
    params: list[torch.nn.Parameter], config: OptimConfig, ranks: Ranks, distributed: bool
) -> torch.optim.Optimizer:
    if not params:
        raise ValueError("the model has no trainable parameters")
    # as the FSDP engine: override_optimizer_config entries (e.g. eps) go to the constructor; unlike it, no fused
    # default on CUDA (not measured with ZeRO-1's sharded state)
    kwargs = dict(lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay)
    kwargs.update(config.override_optimizer_config or {})
    if distributed and ranks.dp_size > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(
            params, optimizer_class=torch.optim.AdamW, process_group=ranks.dp_group, **kwargs
        )
    return torch.optim.AdamW(params, **kwargs)


def local_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer that holds this rank's state (ZeRO's inner optimizer, or the optimizer itself)."""
    return getattr(optimizer, "optim", optimizer)


def move_optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move every optimizer state tensor (Adam moments and step counters) to ``device``."""
    for state in local_optimizer(optimizer).state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.device != device and key != "step":
                state[key] = value.to(device, non_blocking=True)


def move_module_params(modules: list[torch.nn.Module], device: torch.device) -> None:
    """Move parameters (and their gradients, if any) of ``modules`` to ``device`` in place."""
    with torch.no_grad():
        for module in modules:
            for param in module.parameters():
                param.data = param.data.to(device, non_blocking=True)
                if param.grad is not None:
                    param.grad = param.grad.to(device, non_blocking=True)
    if device.type == "cpu" and torch.cuda.is_available():
        torch.cuda.empty_cache()

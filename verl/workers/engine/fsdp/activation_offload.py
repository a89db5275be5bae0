"""Activation offload (``model.enable_activation_offload``): tensors saved for the backward pass during the
model's forward go to host memory and come back when the backward pass needs them.

Uses ``torch.autograd.graph.save_on_cpu`` around the module's forward (pinned host memory on GPU). On CPU the
tensors already live in host memory, so the hooks only add the bookkeeping.
"""

from __future__ import annotations

import torch
from torch import nn


def enable_activation_offload(module: nn.Module) -> nn.Module:
    """Offload the activations ``module``'s forward saves for backward; returns ``module`` (hooks installed).

    Only forward passes that build a graph (training) are affected: under ``torch.no_grad`` nothing is saved.
    """
    pin_memory = torch.cuda.is_available()
    active: list = []

    def enter(_module, _args):
        context = torch.autograd.graph.save_on_cpu(pin_memory=pin_memory)
        context.__enter__()
        active.append(context)

    def leave(_module, _args, output):
        active.pop().__exit__(None, None, None)
        return output

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)
    module._verl_activation_offload = True
    return module

"""Activation offload (``model.enable_activation_offload``): tensors autograd saves for the backward pass live in
pinned host memory between the forward and the backward pass, instead of accelerator memory.

Implemented with ``torch.autograd.graph.saved_tensors_hooks`` entered around the module's forward call (forward
pre-hook / forward hook), so every op of the model is covered, including the decoder layers FSDP2 wraps.
Parameters are never moved (FSDP2 re-gathers or frees them itself) and neither are small tensors, where the copy
costs more than the memory it frees. Saved tensors already in host memory (a CPU-only machine) stay where they are.
"""

from __future__ import annotations

import torch
from torch import nn

MIN_OFFLOAD_BYTES = 1 << 20
"""Saved tensors below this size stay on the device."""


class ActivationOffload:
    """Installs the hooks on ``module``; counts what it moved (``offloaded_bytes``, for tests and logs)."""

    def __init__(self, module: nn.Module, min_bytes: int = MIN_OFFLOAD_BYTES):
        self.min_bytes = min_bytes
        self.offloaded_bytes = 0
        self.saved_count = 0
        self._contexts: list = []
        self._handles = [
            module.register_forward_pre_hook(self._enter),
            module.register_forward_hook(self._exit, always_call=True),
        ]

    def should_offload(self, tensor: torch.Tensor) -> bool:
        """An activation worth moving: not a parameter nor a view of one (``linear`` saves ``weight.t()``), and
        at least ``min_bytes`` large."""
        if isinstance(tensor, nn.Parameter) or isinstance(getattr(tensor, "_base", None), nn.Parameter):
            return False
        return tensor.numel() * tensor.element_size() >= self.min_bytes

    def _pack(self, tensor: torch.Tensor):
        self.saved_count += 1
        if tensor.device.type == "cpu" or not self.should_offload(tensor):
            return tensor
        nbytes = tensor.numel() * tensor.element_size()
        host = torch.empty(tensor.shape, dtype=tensor.dtype, layout=tensor.layout, pin_memory=True)
        host.copy_(tensor, non_blocking=True)
        self.offloaded_bytes += nbytes
        return tensor.device, host

    @staticmethod
    def _unpack(packed):
        if isinstance(packed, torch.Tensor):
            return packed
        device, host = packed
        return host.to(device, non_blocking=True)

    def _enter(self, module, args):
        if torch.is_grad_enabled():
            context = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
            context.__enter__()
            self._contexts.append(context)
        else:
            self._contexts.append(None)

    def _exit(self, module, args, output):
        context = self._contexts.pop()
        if context is not None:
            context.__exit__(None, None, None)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

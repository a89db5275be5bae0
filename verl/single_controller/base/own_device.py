"""The GPU a worker process picked for itself, made current in whichever thread runs its methods.

CUDA's current device belongs to a host thread. Ray runs an actor's methods in threads of its own (one per
concurrency group; an asyncio loop for async methods), not always the thread that ran ``__init__``, so a
``torch.cuda.set_device`` made there does not reach them: they start on device 0. A worker that sees several GPUs
and picks its own (``VERL_RAY_SHARE_NODE_GPUS``, ``verl.single_controller.ray.node_gpus``) pins it here, and every
``@register``-ed method makes it current before it runs. A worker that sees one GPU pins nothing: device 0 is then
every thread's device and the right one.
"""

from __future__ import annotations

__all__ = ["enter_own_device", "own_device_index", "pin_own_device"]

_own_index: int | None = None


def pin_own_device(index: int) -> None:
    """Record ``index`` as this process's GPU and make it current in the calling thread."""
    global _own_index
    _own_index = index
    enter_own_device()


def own_device_index() -> int | None:
    """The pinned GPU index, or None where the process pinned none."""
    return _own_index


def enter_own_device() -> None:
    """Make the pinned GPU current in the calling thread (nothing where none is pinned or CUDA is absent)."""
    if _own_index is None:
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.current_device() != _own_index:
        torch.cuda.set_device(_own_index)

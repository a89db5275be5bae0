"""Opt-in: a worker group's workers see every GPU of their node and pick their own, as ``torchrun``'s processes do.

By default Ray shows each GPU actor only the GPU it was given (``CUDA_VISIBLE_DEVICES`` of one entry, device 0 in
the process). vLLM's custom all-reduce then cannot reach the peer GPU (the rollout turns it off, ``engine_args.py``);
NCCL still goes peer to peer (``benchmarks/gpu/nccl_transport.py`` on two H200s: P2P/CUMEM, the same rates either
way). With ``VERL_RAY_SHARE_NODE_GPUS=1`` in the driver's environment, the group asks Ray to leave
``CUDA_VISIBLE_DEVICES`` as the node has it (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES``), and each worker makes
the GPU Ray assigned it its ``LOCAL_RANK`` (the device index torch and the engines read) and its pinned current
device (``verl.single_controller.base.own_device``: current in every thread Ray runs a registered method in). Ray's
resource accounting is unchanged: each worker still holds its own GPU (or its share of one). The custom all-reduce
it gives back did not speed up the GRPO loop at TP=2 on two H200s (session 31, both ways in one call: vLLM 3.97 s a
step shared against 3.73 s isolated, SGLang 2.54 against 2.38 s), hence opt-in.
"""

from __future__ import annotations

import os

from verl.single_controller.base.own_device import pin_own_device

__all__ = ["SHARE_NODE_GPUS_ENV", "select_own_gpu", "sharing_env", "sharing_requested"]

SHARE_NODE_GPUS_ENV = "VERL_RAY_SHARE_NODE_GPUS"
RAY_NOSET_ENV = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


def sharing_requested() -> bool:
    """Whether this process's environment asks for it (the driver's, and a sharing group's workers')."""
    return os.environ.get(SHARE_NODE_GPUS_ENV, "0").strip().lower() in ("1", "true", "yes")


def sharing_env() -> dict[str, str]:
    """Environment a worker group adds to its workers (empty unless the driver asked for sharing)."""
    return {SHARE_NODE_GPUS_ENV: "1", RAY_NOSET_ENV: "1"} if sharing_requested() else {}


def _visible_ids() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        return [entry.strip() for entry in visible.split(",")]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def select_own_gpu() -> int | None:
    """In a worker that sees its node's GPUs: the index of the GPU Ray assigned it among the visible ones, made
    ``LOCAL_RANK`` and the pinned current device (where CUDA is present; ``own_device.py``: in every thread that runs
    a registered method). None where Ray assigned no GPU."""
    import ray

    assigned = [str(gpu) for gpu in ray.get_gpu_ids()]
    if not assigned:
        return None
    visible = _visible_ids()
    if assigned[0] not in visible:
        raise RuntimeError(
            f"{SHARE_NODE_GPUS_ENV}=1: Ray assigned this worker GPU {assigned[0]}, which is not among the visible "
            f"GPUs {visible} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); unset "
            f"{SHARE_NODE_GPUS_ENV} or start Ray with the same CUDA_VISIBLE_DEVICES as the workers see"
        )
    index = visible.index(assigned[0])
    os.environ["LOCAL_RANK"] = str(index)
    pin_own_device(index)  # current here and, through @register, in the threads Ray runs the methods in
    return index

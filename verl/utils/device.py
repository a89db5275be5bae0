"""Device and collective-backend helpers: one place that decides between CUDA/NCCL and CPU/gloo."""

from __future__ import annotations

from pathlib import Path

import torch

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""``/proc/cpuinfo`` flags of a CPU that multiplies bf16 natively (x86's AVX512-BF16 and AMX, Arm's BF16)."""


def is_cuda_available() -> bool:
    """True when a CUDA device can be used by this process."""
    return torch.cuda.is_available()


def get_device_name() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if is_cuda_available() else "cpu"


def get_torch_device():
    """The ``torch.cuda`` namespace on GPU, else ``torch.cpu`` (both offer ``synchronize`` / ``device_count``)."""
    return torch.cuda if is_cuda_available() else torch.cpu


def get_device_id() -> int:
    """Index of the current accelerator (0 on CPU)."""
    return torch.cuda.current_device() if is_cuda_available() else 0


def get_nccl_backend() -> str:
    """Collective backend for the current device: nccl for CUDA tensors (gloo kept for CPU ones) on GPU, gloo on CPU.

    The CPU side matters on GPU too: small bookkeeping collectives (token counts, checkpoint barriers) run on CPU
    tensors, which plain ``"nccl"`` refuses.
    """
    return "cpu:gloo,cuda:nccl" if is_cuda_available() else "gloo"


def current_device() -> torch.device:
    """The ``torch.device`` that compute should run on in this process."""
    if is_cuda_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def cpu_multiplies_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU multiplies bf16 natively (a flag of :data:`NATIVE_BF16_FLAGS` in ``cpuinfo``); None where
    the file cannot be read (not Linux). Elsewhere bf16 matmuls are emulated, many times slower than fp32."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):  # x86, Arm
            return not NATIVE_BF16_FLAGS.isdisjoint(value.split())
    return None

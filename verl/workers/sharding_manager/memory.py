"""Memory of this process, logged per phase (``perf/<phase>_memory_gb``) by the weight-sync managers.

On GPU: ``torch.cuda`` allocator statistics of the current device. On CPU: the process's resident set size
(``psutil``) and its peak (``ru_maxrss``), since a CPU tensor allocator keeps no statistics.
"""

from __future__ import annotations

import resource
import sys

import psutil
import torch

GIB = float(1 << 30)


def memory_metrics(phase: str) -> dict[str, float]:
    """``{perf/<phase>_memory_gb, perf/<phase>_max_memory_gb[, perf/<phase>_memory_reserved_gb,
    perf/<phase>_device_memory_used_gb]}`` in GiB.

    ``memory_gb`` is memory in use now (CUDA: allocated; CPU: RSS); ``max_memory_gb`` the process peak so far
    (CUDA: max allocated; CPU: peak RSS); ``memory_reserved_gb`` (CUDA only) what the caching allocator holds;
    ``device_memory_used_gb`` (CUDA only) what the whole device has in use (``total - free``): it also counts an
    engine's sleep-mode pool and engines in other processes (SGLang's scheduler), which the allocator does not see.
    """
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        free, total = torch.cuda.mem_get_info()
        return {
            f"perf/{phase}_memory_gb": torch.cuda.memory_allocated() / GIB,
            f"perf/{phase}_max_memory_gb": torch.cuda.max_memory_allocated() / GIB,
            f"perf/{phase}_memory_reserved_gb": torch.cuda.memory_reserved() / GIB,
            f"perf/{phase}_device_memory_used_gb": (total - free) / GIB,
        }
    rss = psutil.Process().memory_info().rss
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_bytes = peak_rss if sys.platform == "darwin" else peak_rss * 1024  # Linux reports KiB
    return {
        f"perf/{phase}_memory_gb": rss / GIB,
        f"perf/{phase}_max_memory_gb": max(peak_bytes, rss) / GIB,
    }

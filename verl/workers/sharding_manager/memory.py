"""Memory of this process, logged per phase (``perf/<phase>_memory_gb``) by the weight-sync managers, and
whether training's cached blocks must go back to the device before a sleeping engine wakes (:class:`WakeMemory`).

On GPU: ``torch.cuda`` allocator statistics of the current device. On CPU: the process's resident set size
(``psutil``) and its peak (``ru_maxrss``), since a CPU tensor allocator keeps no statistics.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Callable, Iterator

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
    device = _device_memory()
    if device is not None:
        free, total = device
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


def phase_end_memory(phase: str) -> dict[str, float]:
    """``{"perf/device_memory_used_gb/<phase>": GiB}``: what the whole device has in use (``total - free``, every
    process) as a worker phase ends; {} without a CUDA device.

    It stands for the phase's peak without a thread polling the device (session 35: an NVML sampler every 100 ms
    beside the loop may have slowed SGLang's decode). Torch's caching allocator keeps the blocks a phase reserved
    until ``empty_cache``, which the FSDP2 training phases do not call, and an engine's KV cache and graph pools are
    sized at its wake, so device use only grows inside a phase; taken before the engine sleeps, the generation's is
    the engine's full footprint plus training's cache. A transient that another process frees inside the phase is
    missed."""
    memory = _device_memory()
    if memory is None:
        return {}
    free, total = memory
    return {f"perf/device_memory_used_gb/{phase}": (total - free) / GIB}


def _device_memory() -> tuple[int, int] | None:
    """``(free, total)`` bytes of the current CUDA device, or None without one."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.mem_get_info()
    return None


@contextlib.contextmanager
def cache_kept() -> Iterator[None]:
    """``torch.cuda.empty_cache()`` does nothing inside the block (vLLM's sleep calls it to return this process's
    cached blocks to the device; see :meth:`WakeMemory.release`)."""
    empty_cache = torch.cuda.empty_cache
    torch.cuda.empty_cache = lambda: None
    try:
        yield
    finally:
        torch.cuda.empty_cache = empty_cache


class WakeMemory:
    """When training's cached GPU blocks go back to the device around an engine's sleep: only before a wake that
    needs them (:meth:`before_wake`), never at the sleep (:meth:`release`).

    vLLM's and SGLang's sleep modes map the engine's weights and KV cache with the CUDA driver, outside torch's
    caching allocator, so the blocks training left cached there are invisible to a waking engine; emptying the cache
    hands them back, at 0.03-0.04 s a step on an H200 (``rollout/sync_empty_cache_s``, session 19). It is needed only
    when the device's free memory cannot hold what the engine gave back at its last sleep plus a margin for the
    generation's own allocations; on an H200 the GRPO benchmark leaves about 75 GB free for a 26 GB engine, on an
    80 GB H100 it does not. Before the first sleep (nothing measured yet) it answers True; without a CUDA device, False.

    At the sleep, emptying the cache buys nothing: the blocks are this process's, and training, which runs next in
    it, reuses them from the cache. It only makes training pay ``cudaMalloc`` for them again, and where the wake had
    kept them (the big training cache), the sleep paid to free them: SGLang's release took 0.079 s a step instead of
    0.02 on an H200 in session 20 when its manager emptied the cache after it.

    ``device_memory`` returns ``(free, total)`` bytes (default: the current CUDA device's; tests pass their own)."""

    MARGIN_FRACTION = 0.1
    """Free memory kept beyond the engine's own, as a fraction of the device (at least ``MIN_MARGIN_BYTES``)."""
    MIN_MARGIN_BYTES = 4 << 30

    def __init__(self, device_memory: Callable[[], tuple[int, int] | None] = _device_memory) -> None:
        self.device_memory = device_memory
        self.engine_bytes: int | None = None

    def release(self, sleep: Callable[[], None]) -> None:
        """Put the engine to sleep with ``sleep()`` (every rank's, when it returns), keeping this process's cached
        blocks (:func:`cache_kept`: vLLM's sleep would empty them), and measure what the engine gave back: the
        device's free memory after the sleep less that before it."""
        before = self.device_memory()
        with cache_kept():
            sleep()
        after = self.device_memory()
        if before is not None and after is not None:
            self.engine_bytes = max(0, after[0] - before[0])

    def before_wake(self) -> dict[str, float]:
        """Empty training's cache if :meth:`needs_empty_cache`; ``{"rollout/sync_empty_cache_skipped": 0. or 1.}``."""
        emptied = self.needs_empty_cache()
        if emptied:  # training's cached blocks back to the device before the engine maps its own
            torch.cuda.empty_cache()
        return {"rollout/sync_empty_cache_skipped": float(not emptied)}

    def needs_empty_cache(self) -> bool:
        """True unless the device's free memory already holds the engine's measured footprint plus the margin."""
        memory = self.device_memory()
        if memory is None or self.engine_bytes is None:
            return memory is not None
        free, total = memory
        margin = max(self.MIN_MARGIN_BYTES, int(self.MARGIN_FRACTION * total))
        return free < self.engine_bytes + margin

"""Phase timers: ``with marked_timer("gen", timing_raw): ...`` adds the elapsed seconds to ``timing_raw["gen"]``."""

from __future__ import annotations

import logging
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from codetiming import Timer

logger = logging.getLogger(__name__)


@contextmanager
def simple_timer(name: str, timing_raw: dict[str, float]) -> Iterator[None]:
    """Time the block with ``codetiming.Timer`` and accumulate the seconds into ``timing_raw[name]``.

    Accumulating (rather than overwriting) lets a phase that runs several times in one step, such as
    generation under dynamic sampling, report its total.
    """
    with Timer(name=name, logger=None) as timer:
        yield
    timing_raw[name] = timing_raw.get(name, 0.0) + timer.last


@contextmanager
def marked_timer(name: str, timing_raw: dict[str, float], color: str | None = None, **kwargs) -> Iterator[None]:
    """verl's signature (``color`` marks profiler ranges there); on this build it is ``simple_timer``. The phase's
    start is logged at DEBUG (``VERL_LOGGING_LEVEL=DEBUG``: where a run that seems stuck is)."""
    logger.debug("phase %s started", name)
    with simple_timer(name, timing_raw):
        yield


def max_memory_allocated_gb() -> float:
    """Peak accelerator memory of this process in GiB, as verl's ``perf/max_memory_allocated_gb``; on CPU the
    process's peak resident set size (a CPU tensor allocator keeps no statistics)."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 1024**3
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return peak * (1 if sys.platform == "darwin" else 1024) / 1024**3

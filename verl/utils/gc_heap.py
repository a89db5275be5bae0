"""A worker process's Python heap and CPython's cyclic garbage collector: collector pauses measured, and the
long-lived heap frozen once the training loop is warm.

A hybrid worker holds the policy, its optimizer, the compiled graphs of ``torch.compile``, Ray's and the rollout
engine's objects: millions of tracked containers that never become garbage. Each full (generation 2) collection walks
all of them and stops every Python thread of the process meanwhile, for tenths of a second. With SGLang in process,
the engine's tokenizer manager (which receives every decode step's outputs) runs in this process, so such a pause
stalls the rollout's generation; the bare engine, in a process of its own, has a small heap and barely pauses
(SGLang's ``Engine.freeze_gc`` and vLLM's workers freeze their own heaps after warm-up for the same reason).

:func:`freeze_after_update` collects once and moves every object alive then into the permanent generation
(``gc.freeze``), when the worker's first actor update returns: by then the first step has built everything the loop
keeps (engines, compiled graphs, optimizer state), and the one-time cost (0.63 s for 1.12M objects in an SGLang
worker on an H200, session 17) lands in the warm-up step. A worker that never updates (a rollout-only worker) freezes
at the start of its second training generation instead (:func:`freeze_after_warmup`). Later collections walk only
objects made after the freeze; cyclic garbage made later is still collected. :class:`GcPauses` measures the
collector's pauses over a block, per generation.
"""

from __future__ import annotations

import gc
import os
import time

FREEZE_ENV = "VERL_GC_FREEZE"
"""``0`` keeps the collector as CPython sets it (no freeze); anything else, or unset, freezes after warm-up."""

WARMUP_GENERATIONS = 1
"""Training generations (validation excluded) before the heap is frozen: the first step builds what the loop keeps."""


class GcPauses:
    """Wall time of the cyclic collector's passes inside a ``with`` block (``gc.callbacks``), per generation.

    ``pause_s[g]`` is the total pause of generation-``g`` passes, ``count[g]`` their number. Passes in any thread of
    the process count: the collector stops them all.
    """

    def __init__(self) -> None:
        self.pause_s = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._started: float | None = None  # one pass at a time: the collector holds the GIL and does not nest

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            generation = int(info["generation"])
            self.pause_s[generation] += time.perf_counter() - self._started
            self.count[generation] += 1
            self._started = None

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._on_gc)

    def metrics(self, prefix: str) -> dict[str, float]:
        """``{prefix}gc_pause_s`` (all generations), ``{prefix}gc_full_pause_s`` and ``{prefix}gc_full_collections``
        (generation 2)."""
        return {
            f"{prefix}gc_pause_s": sum(self.pause_s),
            f"{prefix}gc_full_pause_s": self.pause_s[2],
            f"{prefix}gc_full_collections": float(self.count[2]),
        }


class HeapFreezer:
    """Freezes the process's heap once: after the first actor update, or at the start of training generation number
    ``warmup + 1``, whichever comes first.

    :meth:`after_update` is called when an actor update returns, :meth:`before_generation` at the start of every
    generation (validation generations do not count). Each returns the seconds the freeze took (its one full
    collection) on the call that froze, else 0.0.
    """

    def __init__(self, warmup: int = WARMUP_GENERATIONS, enabled: bool | None = None) -> None:
        self.warmup = warmup
        self.enabled = os.environ.get(FREEZE_ENV, "1") != "0" if enabled is None else enabled
        self.generations = 0
        self.frozen = False
        self.frozen_objects = 0
        """Objects the freeze moved into the permanent generation, counted once when it froze: ``gc.get_freeze_count``
        walks the whole permanent generation, 0.1 s for a worker's 1.1M objects on the H200 host (session 17), too
        slow to call per generation."""

    def before_generation(self, validate: bool = False) -> float:
        if validate:
            return 0.0
        self.generations += 1
        return self._freeze() if self.generations > self.warmup else 0.0

    def after_update(self) -> float:
        return self._freeze()

    def _freeze(self) -> float:
        """The one freeze (0.0 when turned off or already done)."""
        if not self.enabled or self.frozen:
            return 0.0
        start = time.perf_counter()
        gc.collect()  # garbage alive now would otherwise be frozen with the heap and never freed
        gc.freeze()
        self.frozen = True
        self.frozen_objects = gc.get_freeze_count()
        return time.perf_counter() - start


_PROCESS_FREEZER = HeapFreezer()
"""The collector is per process, and so is the freezer (one worker process hosts one rollout)."""


def freeze_after_warmup(validate: bool = False) -> float:
    """:meth:`HeapFreezer.before_generation` of this process's freezer (``$VERL_GC_FREEZE=0`` turns it off)."""
    return _PROCESS_FREEZER.before_generation(validate)


def freeze_after_update() -> float:
    """:meth:`HeapFreezer.after_update` of this process's freezer (``$VERL_GC_FREEZE=0`` turns it off)."""
    return _PROCESS_FREEZER.after_update()


def frozen_objects() -> int:
    """Objects this process's freeze moved into the permanent generation (0 before it; a freeze by other code, such
    as vLLM's engine at start-up, is not counted)."""
    return _PROCESS_FREEZER.frozen_objects

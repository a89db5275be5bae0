"""Weight-sync managers: ``with manager:`` is rollout mode, leaving it is training mode.

On enter a manager makes the rollout engine hold the actor's current weights (and wakes it); on exit it frees
what the engine does not need during training. ``metrics`` holds what the last enter/exit measured:
``timing_s/update_weights``, its parts (``rollout/sync_<part>_s``, :meth:`BaseShardingManager.lap`) and the
per-phase memory of :func:`memory_metrics`.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from verl.protocol import DataProto


class BaseShardingManager:
    """No-op manager; subclasses override :meth:`enter_rollout_mode` / :meth:`exit_rollout_mode`."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}

    def enter_rollout_mode(self) -> None:
        """Make the engine generate with the actor's current weights."""

    def exit_rollout_mode(self) -> None:
        """Give the engine's memory back to training."""

    def __enter__(self) -> BaseShardingManager:
        self.metrics = {}
        self.enter_rollout_mode()
        return self

    def begin_laps(self) -> float:
        """Start timing the parts of an enter (:meth:`lap`); returns the start time."""
        self._lap_start = time.perf_counter()
        return self._lap_start

    def lap(self, part: str) -> None:
        """``metrics["rollout/sync_<part>_s"]``: seconds from the previous lap (or :meth:`begin_laps`) until the
        device has finished the work queued meanwhile; parts of the weight sync, which ``timing_s/update_weights``
        sums."""
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.metrics[f"rollout/sync_{part}_s"] = now - self._lap_start
        self._lap_start = now

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        self.exit_rollout_mode()

    def preprocess_data(self, data: DataProto) -> DataProto:
        """Reshape the worker's batch for the engine (e.g. gather a tensor-parallel group's prompts)."""
        return data

    def postprocess_data(self, data: DataProto) -> DataProto:
        """Undo :meth:`preprocess_data` on the engine's output."""
        return data


class TensorParallelShardingManager(BaseShardingManager):
    """A manager whose engine runs a tensor-parallel group over several worker ranks and generates the group's
    whole batch at once. Subclasses set ``tp_size``, ``tp_rank`` and ``tp_cpu_group`` (the group's gloo group)."""

    tp_size: int = 1
    tp_rank: int = 0
    tp_cpu_group: Any = None

    def preprocess_data(self, data: DataProto) -> DataProto:
        """The engine generates the tensor-parallel group's whole batch: every rank gathers the group's rows."""
        if self.tp_size == 1:
            return data
        parts: list[Any] = [None] * self.tp_size
        dist.all_gather_object(parts, data, group=self.tp_cpu_group)
        return DataProto.concat(parts)

    def postprocess_data(self, data: DataProto) -> DataProto:
        """Keep this rank's share of the gathered batch (equal batch sizes per rank; samples stay contiguous)."""
        if self.tp_size == 1:
            return data
        return data.chunk(self.tp_size)[self.tp_rank]

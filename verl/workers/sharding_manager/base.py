"""Weight-sync managers: ``with manager:`` is rollout mode, leaving it is training mode.

On enter a manager makes the rollout engine hold the actor's current weights (and wakes it); on exit it frees
what the engine does not need during training. ``metrics`` holds what the last enter/exit measured:
``timing_s/update_weights`` and the per-phase memory of :func:`memory_metrics`.
"""

from __future__ import annotations

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

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        self.exit_rollout_mode()

    def preprocess_data(self, data: DataProto) -> DataProto:
        """Reshape the worker's batch for the engine (e.g. gather a tensor-parallel group's prompts)."""
        return data

    def postprocess_data(self, data: DataProto) -> DataProto:
        """Undo :meth:`preprocess_data` on the engine's output."""
        return data

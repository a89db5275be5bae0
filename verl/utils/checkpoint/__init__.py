"""Checkpoint managers: save and restore a training engine's state."""

from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

__all__ = ["FSDPCheckpointManager"]

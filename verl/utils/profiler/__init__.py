"""Timing helpers for the trainer loop (``marked_timer``, ``simple_timer``) and device-memory readings."""

from verl.utils.profiler.performance import marked_timer, max_memory_allocated_gb, simple_timer

__all__ = ["marked_timer", "simple_timer", "max_memory_allocated_gb"]

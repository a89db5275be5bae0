"""The parts of a weight sync: each ``lap`` records the seconds since the previous one, under its own key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from verl.workers.sharding_manager import base
from verl.workers.sharding_manager.base import BaseShardingManager


class ThreePartSync(BaseShardingManager):
    def enter_rollout_mode(self) -> None:
        start = self.begin_laps()
        self.lap("wake_weights")
        self.lap("send")
        self.lap("wake_cache")
        self.metrics["timing_s/update_weights"] = base.time.perf_counter() - start


def test_laps_split_the_sync_into_consecutive_parts(monkeypatch):
    clock = iter([10.0, 10.5, 12.0, 12.25, 12.25])  # begin, three laps, the total
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: next(clock)))  # this module's clock only
    with ThreePartSync() as manager:
        pass
    assert manager.metrics == pytest.approx(
        {
            "rollout/sync_wake_weights_s": 0.5,
            "rollout/sync_send_s": 1.5,
            "rollout/sync_wake_cache_s": 0.25,
            "timing_s/update_weights": 2.25,
        }
    )

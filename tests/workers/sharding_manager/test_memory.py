"""Per-phase memory metrics against psutil / the CUDA allocator read directly."""

import psutil
import torch

from verl.workers.sharding_manager import memory_metrics


def test_cpu_metrics_track_process_rss():
    if torch.cuda.is_available():
        return
    before = memory_metrics("rollout")
    assert set(before) == {"perf/rollout_memory_gb", "perf/rollout_max_memory_gb"}
    rss_gb = psutil.Process().memory_info().rss / (1 << 30)
    assert abs(before["perf/rollout_memory_gb"] - rss_gb) < 0.05
    # The allocator may reuse memory freed by earlier tests, so RSS need not grow: compare with psutil again.
    block = torch.ones(64 << 20, dtype=torch.uint8)  # touch 64 MiB
    after = memory_metrics("training")
    rss_after_gb = psutil.Process().memory_info().rss / (1 << 30)
    assert abs(after["perf/training_memory_gb"] - rss_after_gb) < 0.05
    assert after["perf/training_max_memory_gb"] >= after["perf/training_memory_gb"]
    del block

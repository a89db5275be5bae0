"""Per-phase memory metrics against psutil / the CUDA allocator read directly."""

import psutil
import pytest
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


GB = 1 << 30


class Device:
    """A device's memory as the driver sees it: training's cached blocks and the engine's pools are both in use."""

    def __init__(self, total: int, engine: int, training_cache: int) -> None:
        self.total, self.engine, self.training_cache, self.engine_awake = total, engine, training_cache, True

    def memory(self) -> tuple[int, int]:
        used = self.training_cache + (self.engine if self.engine_awake else 0)
        return self.total - used, self.total

    def sleep_engine(self, wake) -> None:
        """The engine's sleep as the managers wrap it."""
        wake.release(lambda: setattr(self, "engine_awake", False))


def test_wake_keeps_trainings_cache_only_when_the_device_holds_the_engine_too():
    from verl.workers.sharding_manager.memory import WakeMemory

    # the GRPO benchmark on an H200 (session 19): 26 GB engine; training leaves 2 GB cached at the sleep and holds
    # 63 GB at the next wake. Free then: 141 - 63 = 78 GB >= 26 + 14.1 (10% of the device): no empty needed.
    h200 = Device(total=141 * GB, engine=26 * GB, training_cache=2 * GB)
    wake = WakeMemory(h200.memory)
    assert wake.needs_empty_cache()  # nothing measured before the first sleep
    h200.sleep_engine(wake)
    assert wake.engine_bytes == 26 * GB
    h200.training_cache = 63 * GB
    assert not wake.needs_empty_cache()
    # the same workload on an 80 GB H100: free 17 GB < 26 + 8 GB
    h100 = Device(total=80 * GB, engine=26 * GB, training_cache=2 * GB)
    wake = WakeMemory(h100.memory)
    h100.sleep_engine(wake)
    h100.training_cache = 63 * GB
    assert wake.needs_empty_cache()
    # the margin is at least 4 GiB on a small device: 16 GB, engine 6, cache 7 -> free 9 >= 6 + 1.6 but < 6 + 4
    small = Device(total=16 * GB, engine=6 * GB, training_cache=0)
    wake = WakeMemory(small.memory)
    small.sleep_engine(wake)
    small.training_cache = 7 * GB
    assert wake.needs_empty_cache()
    small.training_cache = 11 * GB // 2  # free 10.5 >= 6 + 4
    assert not wake.needs_empty_cache()


def test_without_a_cuda_device_there_is_nothing_to_empty():
    from verl.workers.sharding_manager.memory import WakeMemory

    wake = WakeMemory(lambda: None)
    wake.release(lambda: None)
    assert wake.engine_bytes is None and not wake.needs_empty_cache()


def test_release_keeps_this_processs_cache_and_measures_the_engine_alone(monkeypatch):
    """vLLM's sleep empties torch's cache itself; inside ``release`` that is a no-op, so what the engine gave back is
    measured without training's cached blocks (a 26 GB engine beside 40 GB of cache: 26 GB, not 66)."""
    from verl.workers.sharding_manager.memory import WakeMemory

    emptied = []

    def empty_cache() -> None:
        emptied.append(True)
        device.training_cache = 0

    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    device = Device(total=141 * GB, engine=26 * GB, training_cache=40 * GB)
    wake = WakeMemory(device.memory)

    def vllm_like_sleep() -> None:
        device.engine_awake = False
        torch.cuda.empty_cache()

    wake.release(vllm_like_sleep)
    assert emptied == [] and device.training_cache == 40 * GB
    assert wake.engine_bytes == 26 * GB
    assert torch.cuda.empty_cache is empty_cache  # restored after the sleep
    # and restored when the sleep fails
    with pytest.raises(RuntimeError, match="engine died"):
        wake.release(lambda: (_ for _ in ()).throw(RuntimeError("engine died")))
    assert torch.cuda.empty_cache is empty_cache
    torch.cuda.empty_cache()
    assert emptied == [True]


def test_a_phase_ends_with_the_whole_devices_use_and_nothing_without_a_device(monkeypatch):
    from verl.workers.sharding_manager import memory

    monkeypatch.setattr(memory, "_device_memory", lambda: None)
    assert memory.phase_end_memory("gen") == {}  # the CPU: no device to read
    device = Device(total=141 * GB, engine=26 * GB, training_cache=40 * GB)  # free = 141 - 26 - 40 = 75 GB
    monkeypatch.setattr(memory, "_device_memory", device.memory)
    assert memory.phase_end_memory("gen") == {"perf/device_memory_used_gb/gen": 66 * GB / memory.GIB}

"""A worker's pinned GPU reaches the threads Ray runs its methods in (``own_device.py``).

CUDA keeps the current device per host thread; the fake (``PerThreadCuda``) does the same, so a ``set_device`` made
in one thread is not seen in another, as on a GPU. Session 30 found this on two H200s: with
``VERL_RAY_SHARE_NODE_GPUS=1``, rank 1 picked GPU 1 in ``__init__`` but ran its methods in a concurrency group's
thread on GPU 0, and NCCL refused ("Duplicate GPU detected").
"""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from tests.single_controller.ray.light_workers import PerThreadCuda
from verl.single_controller.base import own_device
from verl.single_controller.base.decorator import Dispatch, register


@pytest.fixture
def cuda(monkeypatch) -> PerThreadCuda:
    fake = PerThreadCuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", fake.current_device)
    monkeypatch.setattr(torch.cuda, "set_device", fake.set_device)
    monkeypatch.setattr(own_device, "_own_index", None)
    return fake


class Probe:
    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def device(self) -> int:
        return torch.cuda.current_device()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def device_async(self) -> int:
        return torch.cuda.current_device()

    def device_unregistered(self) -> int:
        return torch.cuda.current_device()


def _in_new_thread(fn):
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_a_registered_method_runs_on_the_pinned_gpu_in_any_thread(cuda):
    own_device.pin_own_device(1)
    probe = Probe()
    assert torch.cuda.current_device() == 1 and own_device.own_device_index() == 1
    assert _in_new_thread(probe.device_unregistered) == 0  # the fake is per thread, as CUDA is
    assert _in_new_thread(probe.device) == 1
    assert _in_new_thread(lambda: asyncio.run(probe.device_async())) == 1


def test_without_a_pin_methods_leave_the_device_alone(cuda):
    probe = Probe()
    assert _in_new_thread(probe.device) == 0
    assert probe.device() == 0 and cuda.set_calls == 0


def test_the_pin_sets_the_device_once_per_thread(cuda):
    own_device.pin_own_device(1)
    probe = Probe()
    calls_after_pin = cuda.set_calls
    for _ in range(3):
        probe.device()  # the pinning thread: already current
    assert cuda.set_calls == calls_after_pin
    _in_new_thread(lambda: [probe.device() for _ in range(3)])
    assert cuda.set_calls == calls_after_pin + 1

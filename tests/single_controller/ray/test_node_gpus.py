"""``VERL_RAY_SHARE_NODE_GPUS``: on a Ray node with two GPUs (declared to Ray; none exist here) a worker group's
workers see only their own GPU by default, and the node's GPUs when asked, each with the GPU Ray assigned it as
``LOCAL_RANK``, the device index torch and the engines read (verl.single_controller.ray.node_gpus)."""

from __future__ import annotations

import pytest
import ray

from tests.single_controller.ray.light_workers import GpuView, ThreadedGpuView
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl.single_controller.ray.node_gpus import select_own_gpu, sharing_env, sharing_requested


@pytest.fixture(scope="module")
def two_gpu_node():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # what the node's processes see before Ray narrows it
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
        yield
        ray.shutdown()


def _views(monkeypatch, share: bool, worker_cls=GpuView, methods=("view",)) -> list[dict]:
    """Two one-worker groups alive at once: each worker is rank 0 of its group, and one of them holds GPU 1, so a
    ``LOCAL_RANK`` that merely kept the node-local rank would show 0 there. A view maps each of ``methods`` to its
    result."""
    if share:
        monkeypatch.setenv("VERL_RAY_SHARE_NODE_GPUS", "1")
    else:
        monkeypatch.delenv("VERL_RAY_SHARE_NODE_GPUS", raising=False)
    pools = [RayResourcePool([1], use_gpu=True, max_colocate_count=1, cpus_per_bundle=0.5) for _ in range(2)]
    groups = [RayWorkerGroup(pool, RayClassWithInitArgs(worker_cls)) for pool in pools]
    try:
        return [{name: getattr(group, name)()[0] for name in methods} for group in groups]
    finally:
        for group, pool in zip(groups, pools, strict=True):
            for worker in group.workers:
                ray.kill(worker)
            pool.remove_placement_groups()


def test_by_default_each_worker_sees_its_own_gpu_as_device_0(two_gpu_node, monkeypatch):
    views = [v["view"] for v in _views(monkeypatch, share=False)]
    assert sorted(v["assigned"][0] for v in views) == ["0", "1"]
    for view in views:
        assert view["visible"] == view["assigned"][0] and view["local_rank"] == "0"


def test_shared_workers_see_both_gpus_and_name_their_own(two_gpu_node, monkeypatch):
    views = [v["view"] for v in _views(monkeypatch, share=True)]
    assert sorted(v["assigned"][0] for v in views) == ["0", "1"]
    for view in views:
        assert view["visible"] == "0,1" and view["local_rank"] == view["assigned"][0]


def test_a_shared_worker_computes_on_its_own_gpu_in_every_thread_ray_runs_it_in(two_gpu_node, monkeypatch):
    """CUDA's current device is per thread (faked so here); Ray runs a worker with concurrency groups in threads other
    than ``__init__``'s. Session 30 on two H200s: without the pin, rank 1's methods ran on GPU 0."""
    views = _views(monkeypatch, share=True, worker_cls=ThreadedGpuView, methods=("view", "side_view"))
    assert sorted(v["view"]["assigned"][0] for v in views) == ["0", "1"]
    for view in views:
        own = int(view["view"]["assigned"][0])
        assert view["view"]["init"]["device"] == own
        assert view["view"]["method"]["device"] == own and view["side_view"]["device"] == own
        assert view["side_view"]["thread"] != view["view"]["init"]["thread"]  # why the pin is needed


def test_the_group_adds_ray_s_noset_variable_only_when_asked(monkeypatch):
    monkeypatch.delenv("VERL_RAY_SHARE_NODE_GPUS", raising=False)
    assert sharing_env() == {} and not sharing_requested()
    monkeypatch.setenv("VERL_RAY_SHARE_NODE_GPUS", "1")
    assert sharing_env() == {"VERL_RAY_SHARE_NODE_GPUS": "1", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


def test_a_gpu_outside_the_visible_ones_is_named(monkeypatch):
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [3])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(RuntimeError, match=r"assigned this worker GPU 3, which is not among the visible GPUs"):
        select_own_gpu()

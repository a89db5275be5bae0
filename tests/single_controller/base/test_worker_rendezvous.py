"""Rank 0's rendezvous: one store and one published address per process and worker group.

Ray's ``@ray.remote`` on a ``Worker`` subclass instantiates a derived class (``__new__`` runs) when a module that
defines one is imported in a worker. Before the fix, rank 0 published a second address each time, and ranks that had
read the first one waited on a different store than the others until the collective timeout (seen as a flaky
``DistStoreError`` in ``test_worker_group`` after another module's import).
"""

import datetime
import os

import pytest
import ray
import torch.distributed as dist
from ray.experimental.internal_kv import _internal_kv_get

from verl.single_controller.base import Worker
from verl.single_controller.base import worker as worker_module


class _Plain(Worker):
    pass


class _Other(Worker):
    pass


@pytest.fixture()
def rank0_env(monkeypatch):
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    monkeypatch.setenv("WG_PREFIX", "wgtestrdv_")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(worker_module, "_RENDEZVOUS_ADDRESSES", {})
    monkeypatch.setattr(worker_module, "_SERVED_STORES", {})
    yield
    ray.shutdown()


def test_rank_zero_publishes_one_listening_address_per_group(rank0_env):
    first = _Plain()
    published = _internal_kv_get(worker_module.rendezvous_key("wgtestrdv_")).decode()
    assert published == f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"

    # What Ray does for a module-level ``@ray.remote`` Worker subclass imported in the worker: __new__ again.
    ray.remote(_Other)
    second = _Other()
    assert _internal_kv_get(worker_module.rendezvous_key("wgtestrdv_")).decode() == published
    assert (first._master_addr, first._master_port) == (second._master_addr, second._master_port)
    assert list(worker_module._SERVED_STORES) == [published]

    # The server listens before anyone reads the address: a client connects and sees what the server holds.
    host, port = published.rsplit(":", 1)
    client = dist.TCPStore(host, int(port), is_master=False, timeout=datetime.timedelta(seconds=5))
    worker_module._SERVED_STORES[published].set("probe", "1")
    assert client.get("probe") == b"1"


def test_a_one_rank_group_initialises_on_the_served_store(rank0_env):
    worker = _Plain()
    worker.init_process_group(backend="gloo", timeout_s=10)
    try:
        assert dist.get_world_size() == 1 and dist.get_rank() == 0
        assert dist.distributed_c10d._get_default_store() is not None
    finally:
        dist.destroy_process_group()

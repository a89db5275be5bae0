"""``Worker``: the base class of every remote worker (one process per device).

A worker learns its place from environment variables set by the worker group (or by ``torchrun``):
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``. Under Ray, rank 0
starts the rendezvous store (a ``TCPStore`` server on its node IP and a port the kernel assigns) before the
subclass's ``__init__`` runs and publishes its address in Ray's key-value store; the other ranks read it from there,
so ``__init__`` may already call :meth:`init_process_group`.

The server listens from the moment its address is published. Picking a free port and binding it later (what
``MASTER_PORT`` with ``init_method="tcp://"`` does) leaves a window in which another process takes the port, or a
rank's connection attempt to the not-yet-listening port is given that same port as its source and connects to
itself (TCP simultaneous open): the ranks then sit on different stores until the collective timeout.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from verl.single_controller.base.decorator import Dispatch, Execute, register

# Seconds a collective may wait before torch.distributed gives up (``timeout`` of init_process_group).
COLLECTIVE_TIMEOUT_ENV = "VERL_COLLECTIVE_TIMEOUT_S"
DEFAULT_COLLECTIVE_TIMEOUT_S = 600.0
# Seconds a rank > 0 waits for rank 0 to publish the rendezvous address.
RENDEZVOUS_TIMEOUT_ENV = "VERL_RENDEZVOUS_TIMEOUT_S"
_RENDEZVOUS_KV_PREFIX = "verl_rendezvous/"
# The rendezvous store this process serves as rank 0, by "addr:port" (colocated roles share it).
_SERVED_STORES: dict[str, Any] = {}
# The rendezvous address this process uses, by worker-group prefix.
_RENDEZVOUS_ADDRESSES: dict[str, str] = {}


def get_collective_timeout_s() -> float:
    """The collective timeout in seconds: ``$VERL_COLLECTIVE_TIMEOUT_S``, else 600."""
    raw = os.environ.get(COLLECTIVE_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_COLLECTIVE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{COLLECTIVE_TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{COLLECTIVE_TIMEOUT_ENV} must be positive, got {raw!r}")
    return value


def _serve_rendezvous_store() -> str:
    """Start a ``TCPStore`` server on this node's IP and a kernel-assigned port; its ``"addr:port"``."""
    import ray
    import torch.distributed as dist

    host = ray.util.get_node_ip_address()
    store = dist.TCPStore(
        host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=get_collective_timeout_s())
    )
    address = f"{host}:{store.port}"
    _SERVED_STORES[address] = store
    return address


def rendezvous_key(group_prefix: str) -> str:
    """Key under which rank 0 of worker group ``group_prefix`` publishes ``MASTER_ADDR:MASTER_PORT``."""
    return _RENDEZVOUS_KV_PREFIX + group_prefix


def _shares_node_gpus() -> bool:
    """A worker of a Ray group started with ``VERL_RAY_SHARE_NODE_GPUS=1`` (only Ray's workers import Ray)."""
    if os.environ.get("WG_BACKEND") != "ray":
        return False
    from verl.single_controller.ray.node_gpus import sharing_requested

    return sharing_requested()


@dataclass
class DistRankInfo:
    """Where one worker sits: global rank and rank within its node."""

    rank: int
    local_rank: int


@dataclass
class DistGlobalInfo:
    """Sizes of the whole group and of this worker's node."""

    world_size: int
    local_world_size: int


class Worker:
    """Base class of remote workers: rank information, process-group setup, and dispatch info per named mesh."""

    def __new__(cls, *args, **kwargs):
        instance = super().__new__(cls)
        # Roles living inside a colocated worker are built with DISABLE_WORKER_INIT=1: the host did the rendezvous.
        if os.environ.get("DISABLE_WORKER_INIT", "0") != "1" and "WG_PREFIX" in os.environ and "RANK" in os.environ:
            instance._configure_before_init(os.environ["WG_PREFIX"], int(os.environ["RANK"]))
        return instance

    def _configure_before_init(self, group_prefix: str, rank: int) -> None:
        """Rank 0 starts the rendezvous store and publishes its address; the others wait for it. Both put it in
        their environment (``MASTER_ADDR``/``MASTER_PORT``).

        Always done for a worker-group member: a MASTER_ADDR/MASTER_PORT inherited from the driver's environment
        (Ray workers inherit it) would be shared by every worker group and collide. Done once per process and
        group: ``__new__`` also runs for every ``@ray.remote`` subclass of ``Worker`` that a module imported in the
        worker defines (Ray derives a class from it and instantiates that), and a second address published by
        rank 0 would split the ranks between two stores.
        """
        from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_put

        address = _RENDEZVOUS_ADDRESSES.get(group_prefix)
        if address is None:
            key = rendezvous_key(group_prefix)
            if rank == 0:
                address = _serve_rendezvous_store()
                _internal_kv_put(key, address.encode(), overwrite=True)
            else:
                timeout_s = float(os.environ.get(RENDEZVOUS_TIMEOUT_ENV, "300"))
                deadline = time.monotonic() + timeout_s
                raw = _internal_kv_get(key)
                while raw is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"rank {rank} of worker group {group_prefix!r}: rank 0 did not publish the rendezvous "
                            f"address within {timeout_s}s (set {RENDEZVOUS_TIMEOUT_ENV} to wait longer)"
                        )
                    time.sleep(0.02)
                    raw = _internal_kv_get(key)
                address = raw.decode()
            _RENDEZVOUS_ADDRESSES[group_prefix] = address
        master_addr, master_port = address.rsplit(":", 1)
        os.environ["MASTER_ADDR"] = master_addr
        os.environ["MASTER_PORT"] = master_port

    def __init__(self, cuda_visible_devices: str | None = None) -> None:
        self._rank = int(os.environ.get("RANK", "0"))
        self._world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self._local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self._local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self._master_addr = os.environ.get("MASTER_ADDR")
        self._master_port = os.environ.get("MASTER_PORT")
        if cuda_visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        if _shares_node_gpus():
            from verl.single_controller.ray.node_gpus import select_own_gpu

            select_own_gpu()  # this worker sees its node's GPUs: its own becomes LOCAL_RANK and the current device
        elif visible and "," not in visible:
            # Ray shows each GPU actor only its own device, as device 0; torch (DeviceMesh, set_device) reads
            # LOCAL_RANK as a device index, so it must name that device, not the node-local rank.
            os.environ["LOCAL_RANK"] = "0"
        self.__dispatch_dp_rank: dict[str, int] = {}
        self.__collect_dp_rank: dict[str, bool] = {}

    # ------------------------------------------------------------------------------------------ rank information

    @property
    def rank(self) -> int:
        """Global rank in the worker group."""
        return self._rank

    @property
    def world_size(self) -> int:
        """Number of workers in the group."""
        return self._world_size

    @property
    def local_rank(self) -> int:
        """Rank among the group's workers on this node."""
        return self._local_rank

    @property
    def local_world_size(self) -> int:
        """Number of the group's workers on this node."""
        return self._local_world_size

    def get_master_addr_port(self) -> tuple[str | None, str | None]:
        """The rendezvous address of the group's process group."""
        return self._master_addr, self._master_port

    def get_cuda_visible_devices(self) -> str:
        """``CUDA_VISIBLE_DEVICES`` of this process (``"not set"`` on CPU)."""
        return os.environ.get("CUDA_VISIBLE_DEVICES", "not set")

    @property
    def rank_info(self) -> DistRankInfo:
        return DistRankInfo(rank=self._rank, local_rank=self._local_rank)

    @property
    def global_info(self) -> DistGlobalInfo:
        return DistGlobalInfo(world_size=self._world_size, local_world_size=self._local_world_size)

    # ------------------------------------------------------------------------------------------ torch.distributed

    def init_process_group(self, backend: str | None = None, timeout_s: float | None = None) -> None:
        """Join the group's ``torch.distributed`` process group (nccl on GPU, gloo on CPU); no-op if joined.

        ``timeout_s`` bounds every collective; default ``$VERL_COLLECTIVE_TIMEOUT_S`` (600 s).
        """
        import torch
        import torch.distributed as dist

        if dist.is_initialized():
            return
        if self._master_addr is None or self._master_port is None:
            raise RuntimeError(
                f"rank {self._rank}: MASTER_ADDR/MASTER_PORT are not set; start workers through RayWorkerGroup "
                "or torchrun"
            )
        if backend is None:
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        timeout = timedelta(seconds=timeout_s if timeout_s is not None else get_collective_timeout_s())
        store = _SERVED_STORES.get(f"{self._master_addr}:{self._master_port}")
        if store is None and self._rank != 0:
            # Rank 0 already listens (it published the address only after starting the server).
            store = dist.TCPStore(self._master_addr, int(self._master_port), is_master=False, timeout=timeout)
        if store is not None:
            store.set_timeout(timeout)
            dist.init_process_group(
                backend=backend, store=store, rank=self._rank, world_size=self._world_size, timeout=timeout
            )
            return
        # torchrun's environment: rank 0 serves the store on MASTER_PORT.
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://{self._master_addr}:{self._master_port}",
            rank=self._rank,
            world_size=self._world_size,
            timeout=timeout,
        )

    def init_device_mesh(self, mesh_shape: tuple[int, ...], mesh_dim_names: tuple[str, ...]) -> Any:
        """A ``torch.distributed.DeviceMesh`` over the group (joins the process group first)."""
        import torch
        from torch.distributed.device_mesh import init_device_mesh

        self.init_process_group()
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        return init_device_mesh(device_type, mesh_shape=tuple(mesh_shape), mesh_dim_names=tuple(mesh_dim_names))

    def register_mesh_dispatch(self, mesh_name: str, device_mesh: Any, dp_dim: str = "dp") -> None:
        """Register this rank for mesh-aware dispatch from a DeviceMesh: dp rank from ``dp_dim``; collect on the
        first rank of every other dimension (tensor/sequence-parallel peers are not collected twice)."""
        other_dims = [name for name in device_mesh.mesh_dim_names if name != dp_dim]
        is_collect = all(device_mesh[name].get_local_rank() == 0 for name in other_dims)
        self._register_dispatch_collect_info(mesh_name, device_mesh[dp_dim].get_local_rank(), is_collect)

    # ------------------------------------------------------------------------------------------ mesh dispatch info

    def _register_dispatch_collect_info(self, mesh_name: str, dp_rank: int, is_collect: bool) -> None:
        """Record this rank's data-parallel rank on ``mesh_name`` and whether its output is collected."""
        if mesh_name in self.__dispatch_dp_rank:
            raise ValueError(f"rank {self._rank}: mesh {mesh_name!r} is already registered")
        self.__dispatch_dp_rank[mesh_name] = int(dp_rank)
        self.__collect_dp_rank[mesh_name] = bool(is_collect)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def _query_dispatch_info(self, mesh_name: str) -> int | None:
        """This rank's data-parallel rank on ``mesh_name`` (``None`` if not registered)."""
        return self.__dispatch_dp_rank.get(mesh_name)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def _query_collect_info(self, mesh_name: str) -> bool | None:
        """Whether this rank's output is collected on ``mesh_name`` (``None`` if not registered)."""
        return self.__collect_dp_rank.get(mesh_name)

    # ------------------------------------------------------------------------------------------ generic calls

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def execute_with_func_generator(self, func, *args, **kwargs):
        """Run ``func(self, *args, **kwargs)`` on every rank."""
        return func(self, *args, **kwargs)

    @register(dispatch_mode=Dispatch.RANK_ZERO, execute_mode=Execute.RANK_ZERO)
    def execute_func_rank_zero(self, func, *args, **kwargs):
        """Run ``func(*args, **kwargs)`` on rank 0."""
        return func(*args, **kwargs)

"""RayWorkerGroup on a local CPU Ray cluster: every dispatch mode, padding, mesh-aware dispatch, gloo all-reduce,
non-blocking chains, colocated roles and failure reporting (a raising worker, a killed worker, a call timeout)."""

import os
import signal
import threading
import time

import numpy as np
import pytest
import ray
import torch

from tests.single_controller.ray.light_workers import ActorRole, CriticRole, FailsToStart, Sleeper
from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import (
    Dispatch,
    Execute,
    make_nd_compute_dataproto_dispatch_fn,
    register,
    register_dispatch_mode,
)
from verl.single_controller.base.future import DataProtoFuture
from verl.single_controller.ray import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    create_colocated_worker_cls,
)

WORLD_SIZE = 4


def _collect_odd_ranks(worker_group, output):
    return [out for rank, out in enumerate(output) if rank % 2 == 1]


def _dispatch_rank_scaled(worker_group, *args, **kwargs):
    """A user-defined mode: rank i gets every argument multiplied by i."""
    n = worker_group.world_size
    per_rank_args = tuple([arg * rank for rank in range(n)] for arg in args)
    return per_rank_args, {key: [value * rank for rank in range(n)] for key, value in kwargs.items()}


# Registered at import, in the driver and again in each worker process that imports this module.
SCALED_ODD = (
    Dispatch["SCALED_ODD"]
    if "SCALED_ODD" in Dispatch
    else register_dispatch_mode("SCALED_ODD", _dispatch_rank_scaled, _collect_odd_ranks)
)


def _rows(data: DataProto, rank: int, factor: int) -> DataProto:
    return DataProto.from_dict(
        tensors={"y": data.batch["x"] * factor, "worker_rank": torch.full((len(data),), rank)},
        non_tensors={"uid": data.non_tensor_batch["uid"]},
    )


def _rank_plus(worker: Worker, base: int) -> int:
    return base + worker.rank


def _negate(data: DataProto) -> DataProto:
    return DataProto.from_dict(tensors={"y": -data.batch["x"]})


@ray.remote
class DemoWorker(Worker):
    def __init__(self, factor: int) -> None:
        super().__init__()
        self.factor = factor
        self.last_x: list[int] = []

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_dist(self) -> tuple[int, int]:
        mesh = self.init_device_mesh((2, 2), ("dp", "tp"))
        self.register_mesh_dispatch("actor", mesh)
        return torch.distributed.get_rank(), mesh["dp"].get_local_rank()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def whoami(self, tag: str) -> dict:
        return {"tag": tag, "rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank}

    @register(dispatch_mode=Dispatch.ALL_TO_ALL)
    def add_rank(self, x: int) -> int:
        return x + self.rank

    @register(dispatch_mode=Dispatch.RANK_ZERO, execute_mode=Execute.RANK_ZERO)
    def rank_zero_only(self, x: int) -> tuple[int, int]:
        return self.rank, x * self.factor

    @register(dispatch_mode=Dispatch.DP_COMPUTE)
    def square(self, x: int) -> tuple[int, int]:
        return self.rank, x * x

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def scale(self, data: DataProto) -> DataProto:
        return _rows(data, self.rank, self.factor)

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO_WITH_FUNC)
    def apply(self, fn, data: DataProto) -> DataProto:
        return fn(data)

    @register(dispatch_mode=Dispatch.DP_COMPUTE_METRIC)
    def metrics(self, data: DataProto) -> dict:
        return {"rank": self.rank, "rows": len(data), "x_sum": float(data.batch["x"].sum())}

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn("actor"))
    def tp_forward(self, data: DataProto) -> DataProto:
        self.last_x = data.batch["x"].tolist()
        return _rows(data, self.rank, 3)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def seen_x(self) -> list[int]:
        return self.last_x

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def all_reduce(self, values: list[float]) -> float:
        tensor = torch.tensor([values[self.rank]], dtype=torch.float64)
        torch.distributed.all_reduce(tensor)
        return float(tensor.item())

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO, blocking=False)
    def add_one_async(self, data: DataProto) -> DataProto:
        uid = data.non_tensor_batch["uid"]
        return DataProto.from_dict(tensors={"x": data.batch["x"] + 1}, non_tensors={"uid": uid})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    def rank_times(self, k: int) -> int:
        return self.rank * k

    @register(dispatch_mode=SCALED_ODD)
    def echo(self, x: int) -> tuple[int, int]:
        return self.rank, x

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def fail_with_an_echo(self, delay_s: float) -> int:
        """Rank 1 dies first, and ranks 2 and 3 lose their connection to it: its echo, as a lost gloo peer reads."""
        if self.rank == 1:
            time.sleep(delay_s)
            raise AssertionError("the cause, on rank 1")
        if self.rank in (2, 3):
            raise RuntimeError("[gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:2975")
        return self.rank

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def fail_on(self, failing_rank: int) -> int:
        if self.rank == failing_rank:
            raise ValueError(f"boom on purpose from rank {self.rank}")
        return self.rank


def _release(group: RayWorkerGroup, pool: RayResourcePool) -> None:
    """Stop the group's actors and give the pool's CPUs back for the next test."""
    for worker in group.workers:
        ray.kill(worker)
    pool.remove_placement_groups()


def _batch(n: int) -> DataProto:
    return DataProto.from_dict(
        tensors={"x": torch.arange(n, dtype=torch.int64) * 10}, non_tensors={"uid": [f"u{i}" for i in range(n)]}
    )


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def demo_group(ray_cluster):
    pool = RayResourcePool([WORLD_SIZE], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    group = RayWorkerGroup(pool, RayClassWithInitArgs(DemoWorker, factor=2))
    group.init_dist()
    return group


def test_ranks_and_process_group(demo_group):
    infos = demo_group.whoami("hello")
    assert [info["rank"] for info in infos] == [0, 1, 2, 3]
    assert all(info["world_size"] == 4 and info["tag"] == "hello" for info in infos)
    assert [info["local_rank"] for info in infos] == [0, 1, 2, 3]  # one node
    assert demo_group.world_size == 4
    assert [info["rank"] for info in demo_group.execute_all_sync("whoami", "sync")] == [0, 1, 2, 3]
    assert demo_group.execute_rank_zero_sync("whoami", "zero")["rank"] == 0
    assert demo_group.execute_with_func_generator(_rank_plus, 100) == [100, 101, 102, 103]


def test_gloo_all_reduce_sums_across_the_group(demo_group):
    values = [1.25, -3.5, 7.0, 0.125]
    expected = float(np.sum(np.array(values, dtype=np.float64)))
    assert demo_group.all_reduce(values) == [expected] * 4


def test_all_to_all_dp_compute_rank_zero_and_user_mode(demo_group):
    assert demo_group.add_rank([100, 200, 300, 400]) == [100, 201, 302, 403]
    assert demo_group.square([1, 2, 3, 4]) == [(0, 1), (1, 4), (2, 9), (3, 16)]
    assert demo_group.rank_zero_only(21) == (0, 42)
    # SCALED_ODD: rank i gets 5 * i, only odd ranks are collected.
    assert demo_group.echo(5) == [(1, 5), (3, 15)]
    with pytest.raises(ValueError, match="world_size=4"):
        demo_group.square([1, 2, 3])


def test_dp_compute_proto_even_and_uneven(demo_group):
    for n in (8, 10):
        out = demo_group.scale(_batch(n))
        assert len(out) == n
        assert out.batch["y"].tolist() == [20 * i for i in range(n)]
        assert list(out.non_tensor_batch["uid"]) == [f"u{i}" for i in range(n)]
        rows_per_rank = -(-n // WORLD_SIZE)  # ceil: padded to a multiple of 4
        assert out.batch["worker_rank"].tolist() == [i // rows_per_rank for i in range(n)]


def test_dp_compute_proto_with_func_and_metric(demo_group):
    out = demo_group.apply(_negate, _batch(6))
    assert out.batch["y"].tolist() == [-10 * i for i in range(6)]
    metrics = demo_group.metrics(_batch(10))  # padded to 12: rows 10, 11 repeat rows 0, 1
    assert [m["rows"] for m in metrics] == [3, 3, 3, 3]
    padded_x = [10 * i for i in range(10)] + [0, 10]
    assert [m["x_sum"] for m in metrics] == [float(sum(padded_x[3 * r : 3 * r + 3])) for r in range(4)]


def test_mesh_aware_dispatch_collects_once_per_dp_group(demo_group):
    out = demo_group.tp_forward(_batch(5))  # dp=2: padded to 6, chunks of 3
    assert out.batch["y"].tolist() == [30 * i for i in range(5)]
    # Row order follows dp rank; each dp group is collected from its tp-rank-0 worker (ranks 0 and 2) only.
    assert out.batch["worker_rank"].tolist() == [0, 0, 0, 2, 2]
    seen = demo_group.seen_x()
    assert seen[0] == seen[1] == [0, 10, 20]
    assert seen[2] == seen[3] == [30, 40, 0]


def test_non_blocking_chain(demo_group):
    future = demo_group.add_one_async(_batch(8))
    assert isinstance(future, DataProtoFuture)
    chained = demo_group.scale(future)  # the workers materialize the future themselves
    assert chained.batch["y"].tolist() == [2 * (10 * i + 1) for i in range(8)]
    assert future.get().batch["x"].tolist() == [10 * i + 1 for i in range(8)]

    padded_future = demo_group.add_one_async(_batch(7))  # padded to 8 by the dispatcher, unpadded lazily
    assert padded_future.get().batch["x"].tolist() == [10 * i + 1 for i in range(7)]

    refs = demo_group.rank_times(10)
    assert all(isinstance(ref, ray.ObjectRef) for ref in refs)
    assert demo_group.add_rank(refs) == [0, 11, 22, 33]


def test_worker_exception_names_rank_and_traceback(demo_group):
    with pytest.raises(WorkerError) as info:
        demo_group.fail_on(2)
    message = str(info.value)
    assert "rank 2" in message and "'fail_on'" in message
    assert "boom on purpose from rank 2" in message
    assert "traceback" in message and "test_worker_group.py" in message and "in fail_on" in message
    assert isinstance(info.value, ValueError) and info.value.rank == 2
    assert demo_group.fail_on(-1) == [0, 1, 2, 3]  # the group is still usable


def test_the_cause_is_reported_not_its_echo_on_the_other_ranks(demo_group):
    # ranks 2 and 3 fail at once, rank 1 (the cause) a second later: the error is rank 1's, the echoes are listed
    with pytest.raises(WorkerError) as info:
        demo_group.fail_with_an_echo(1.0)
    message = str(info.value)
    assert info.value.rank == 1 and isinstance(info.value, AssertionError)
    assert "worker rank 1" in message.splitlines()[0] and "the cause, on rank 1" in message
    assert "Other ranks failed in the same call too:" in message
    echoes = message.split("Other ranks failed in the same call too:")[1]
    assert "worker rank 2" in echoes and "worker rank 3" in echoes and "Connection closed by peer" in echoes
    assert demo_group.fail_on(-1) == [0, 1, 2, 3]  # the group is still usable


def test_colocated_roles_share_one_actor(ray_cluster):
    pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    colocated = create_colocated_worker_cls(
        {"actor": RayClassWithInitArgs(ActorRole, step_size=3), "critic": RayClassWithInitArgs(CriticRole, offset=100)}
    )
    host = RayWorkerGroup(pool, colocated)
    groups = host.spawn(prefix_set=["actor", "critic"])
    actor_where, critic_where = groups["actor"].where(), groups["critic"].where()
    assert [w[:2] for w in actor_where] == [("actor", 0), ("actor", 1)]
    assert [w[:2] for w in critic_where] == [("critic", 0), ("critic", 1)]
    assert [w[2] for w in actor_where] == [w[2] for w in critic_where]  # same process per rank
    assert actor_where[0][2] != actor_where[1][2]
    assert groups["actor"].step() == [3, 3] and groups["actor"].step() == [6, 6]
    assert groups["critic"].value([1, 2]) == [101, 103]
    assert not hasattr(groups["critic"], "step")
    assert groups["actor"]._query_dispatch_info("actor") == [0, 1]
    assert groups["critic"]._query_dispatch_info("actor") == [None, None]
    _release(host, pool)


def test_timeouts_and_killed_worker_give_clear_errors(ray_cluster):
    pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    cls = RayClassWithInitArgs(Sleeper)
    group = RayWorkerGroup(pool, cls, call_timeout_s=30, collective_timeout_s=2)
    pids = group.pid()

    # The collective timeout reaches torch.distributed: rank 0 gives up after 2 s instead of hanging. Usually in the
    # all-reduce (gloo: "Timed out waiting 2000ms for recv"); on a loaded machine rank 1 can reach the process group's
    # rendezvous more than 2 s after rank 0, which then gives up there ("wait timeout after 2000ms"). Either way the
    # configured 2000 ms is the limit that fired.
    with pytest.raises(
        WorkerError, match=r"(?s)worker rank 0.*all_reduce_without_rank_one.*(?:[Tt]imed out|timeout).*2000 ?ms"
    ):
        group.all_reduce_without_rank_one()

    impatient = RayWorkerGroup.from_detached(
        worker_handles=group.workers, worker_names=group.worker_names, ray_cls_with_init=cls, call_timeout_s=0.3
    )
    with pytest.raises(WorkerTimeoutError, match=r"ranks \[0, 1\].*within 0.3s"):
        impatient.nap(1.5)

    killer = threading.Timer(0.5, os.kill, (pids[1], signal.SIGKILL))
    killer.start()
    with pytest.raises(WorkerDiedError) as info:  # not WorkerTimeoutError: the death is seen before the 30 s timeout
        group.nap(20)
    killer.join()
    assert info.value.rank == 1
    assert "worker rank 1" in str(info.value) and "died while running 'nap'" in str(info.value)
    _release(group, pool)


def test_worker_failing_in_init_names_rank(ray_cluster):
    pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    with pytest.raises(WorkerError, match=r"(?s)failed to start.*worker rank 1.*cannot load the model on rank 1"):
        RayWorkerGroup(pool, RayClassWithInitArgs(FailsToStart, failing_rank=1))
    pool.remove_placement_groups()

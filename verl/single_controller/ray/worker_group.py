"""``RayWorkerGroup``: one Ray actor per resource-pool bundle, driven as one object.

Every ``@register``-ed method of the worker class becomes a method of the group that dispatches its arguments,
runs on the actors and collects the outputs (:mod:`verl.single_controller.base.decorator`). The actors get their
place in the ``torch.distributed`` process group through environment variables (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``WG_PREFIX``, and the rendezvous address from rank 0).

Failures: a worker that raises gives a :class:`~verl.single_controller.ray.results.WorkerError` naming its rank and
carrying its traceback; a worker that dies gives a ``WorkerDiedError``; ``call_timeout_s`` (or
``$VERL_WORKER_CALL_TIMEOUT_S``) bounds every blocking call; ``collective_timeout_s`` (or
``$VERL_COLLECTIVE_TIMEOUT_S``) is handed to the workers for ``init_process_group``.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter

import ray
from ray.experimental.internal_kv import _internal_kv_del

from verl.single_controller.base.worker import COLLECTIVE_TIMEOUT_ENV, RENDEZVOUS_TIMEOUT_ENV, rendezvous_key
from verl.single_controller.base.worker_group import WorkerGroup
from verl.single_controller.ray.actor_class import RayClassWithInitArgs
from verl.single_controller.ray.node_gpus import sharing_env
from verl.single_controller.ray.resource_pool import RayResourcePool
from verl.single_controller.ray.results import CALL_TIMEOUT_ENV, WorkerError, get_results


def _env_seconds(name: str) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None


class RayWorkerGroup(WorkerGroup):
    """Actors of ``ray_cls_with_init`` on the bundles of ``resource_pool`` (rank = bundle order)."""

    def __init__(
        self,
        resource_pool: RayResourcePool | None = None,
        ray_cls_with_init: RayClassWithInitArgs | None = None,
        bin_pack: bool = True,
        name_prefix: str | None = None,
        detached: bool = False,
        worker_names: list[str] | None = None,
        worker_handles: list | None = None,
        ray_wait_register_center_timeout: int = 300,
        device_name: str = "cuda",
        call_timeout_s: float | None = None,
        collective_timeout_s: float | None = None,
        **kwargs,
    ) -> None:
        super().__init__(resource_pool=resource_pool, **kwargs)
        self.ray_cls_with_init = ray_cls_with_init
        self.name_prefix = name_prefix if name_prefix is not None else f"wg{uuid.uuid4().hex[:8]}_"
        self.device_name = device_name
        self._detached = detached
        self._ray_wait_register_center_timeout = ray_wait_register_center_timeout
        self.call_timeout_s = call_timeout_s if call_timeout_s is not None else _env_seconds(CALL_TIMEOUT_ENV)
        # Prefix of this group's methods on its actors ("actor_rollout_" for a role spawned from colocated actors),
        # for direct actor calls such as getattr(actor, method_prefix + "generate").
        self.method_prefix = ""
        self.collective_timeout_s = collective_timeout_s
        self.resource_pool = resource_pool
        if worker_handles is not None:
            self._workers = list(worker_handles)
            self._worker_names = list(worker_names or [f"{self.name_prefix}{i}" for i in range(len(worker_handles))])
        elif resource_pool is not None:
            if ray_cls_with_init is None:
                raise ValueError("RayWorkerGroup needs ray_cls_with_init to start workers on a resource pool")
            self._start_workers(resource_pool, ray_cls_with_init)
        if ray_cls_with_init is not None:
            self._bind_worker_method(ray_cls_with_init.user_cls)

    # ------------------------------------------------------------------------------------------ startup

    def _worker_env(self, rank: int, local_rank: int, local_world_size: int) -> dict[str, str]:
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(self._world_size_to_start),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_world_size),
            "RAY_LOCAL_RANK": str(local_rank),
            "RAY_LOCAL_WORLD_SIZE": str(local_world_size),
            "WG_PREFIX": self.name_prefix,
            "WG_BACKEND": "ray",
            RENDEZVOUS_TIMEOUT_ENV: str(self._ray_wait_register_center_timeout),
            **sharing_env(),  # VERL_RAY_SHARE_NODE_GPUS=1: workers see the node's GPUs (node_gpus.py)
        }
        collective_timeout = self.collective_timeout_s
        if collective_timeout is None:
            collective_timeout = _env_seconds(COLLECTIVE_TIMEOUT_ENV)
        if collective_timeout is not None:
            env[COLLECTIVE_TIMEOUT_ENV] = str(collective_timeout)
        return env

    def _start_workers(self, resource_pool: RayResourcePool, ray_cls_with_init: RayClassWithInitArgs) -> None:
        slots = resource_pool.bundle_slots(device_name=self.device_name)
        pg_index = {pg.id: index for index, pg in enumerate(resource_pool.get_placement_groups())}
        node_ids = resource_pool.bundle_node_ids()
        self._world_size_to_start = len(node_ids)
        per_node = Counter(node_ids)
        seen_on_node: Counter = Counter()
        share = 1 / resource_pool.max_colocate_count
        cls_name = ray_cls_with_init.user_cls.__name__
        for rank, (pg, bundle_index) in enumerate(slots):
            node_id = node_ids[rank]
            local_rank = seen_on_node[node_id]
            seen_on_node[node_id] += 1
            name = f"{self.name_prefix}{cls_name}_{pg_index[pg.id]}:{bundle_index}"
            if self._detached:
                ray_cls_with_init.update_options({"lifetime": "detached"})
            actor = ray_cls_with_init(
                placement_group=pg,
                placement_group_bundle_idx=bundle_index,
                use_gpu=resource_pool.use_gpu,
                num_gpus=share,
                num_cpus=share * resource_pool.cpus_per_bundle,
                device_name=self.device_name,
                env_vars=self._worker_env(rank, local_rank, per_node[node_id]),
                name=name,
            )
            self._workers.append(actor)
            self._worker_names.append(name)
        try:
            ready = [worker.__ray_ready__.remote() for worker in self._workers]
            self._get_results(ready, list(range(len(ready))), "__init__", timeout_s=None)
        except WorkerError as error:
            self._kill_workers()
            raise WorkerError(f"worker group {self.name_prefix!r} failed to start: {error}", error.rank) from error
        finally:
            _internal_kv_del(rendezvous_key(self.name_prefix))

    def _kill_workers(self) -> None:
        for worker in self._workers:
            ray.kill(worker, no_restart=True)

    @classmethod
    def from_detached(
        cls,
        name_prefix: str | None = None,
        worker_names: list[str] | None = None,
        worker_handles: list | None = None,
        ray_cls_with_init: RayClassWithInitArgs | None = None,
        **kwargs,
    ) -> RayWorkerGroup:
        """A group over existing actors (by handle, or looked up by name)."""
        if worker_handles is None:
            if worker_names is None:
                raise ValueError("from_detached needs worker_handles or worker_names")
            worker_handles = [ray.get_actor(name) for name in worker_names]
        return cls(
            resource_pool=None,
            ray_cls_with_init=ray_cls_with_init,
            name_prefix=name_prefix,
            worker_names=worker_names,
            worker_handles=worker_handles,
            **kwargs,
        )

    def spawn(self, prefix_set) -> dict[str, RayWorkerGroup]:
        """One group per role of a colocated worker class: role ``r``'s ``r_method`` is exposed as ``method``."""
        spawned = {}
        for prefix in prefix_set:
            group = self.from_detached(
                name_prefix=self.name_prefix,
                worker_names=self._worker_names,
                worker_handles=self._workers,
                ray_cls_with_init=self.ray_cls_with_init,
                call_timeout_s=self.call_timeout_s,
            )
            role_prefix = f"{prefix}_"
            role_methods = [name for name in vars(group) if name.startswith(role_prefix)]
            if not role_methods:
                raise ValueError(f"spawn: no registered method starts with {role_prefix!r}; is {prefix!r} a role?")
            for method_name in role_methods:
                setattr(group, method_name.removeprefix(role_prefix), getattr(group, method_name))
            group.method_prefix = role_prefix
            spawned[prefix] = group
        return spawned

    # ------------------------------------------------------------------------------------------ execution

    @property
    def worker_names(self) -> list[str]:
        return self._worker_names

    @property
    def workers(self) -> list:
        """Actor handles in rank order."""
        return self._workers

    def _get_results(self, refs: list, ranks: list[int], method_name: str, timeout_s: float | None = -1) -> list:
        return get_results(
            refs,
            ranks,
            method_name,
            group_name=self.name_prefix,
            timeout_s=self.call_timeout_s if timeout_s == -1 else timeout_s,
            worker_names=self._worker_names,
        )

    def _execute_remote_single_worker(self, worker, method_name: str, *args, **kwargs):
        return getattr(worker, method_name).remote(*args, **kwargs)

    def _execute_per_rank(self, method_name: str, args: tuple, kwargs: dict) -> list:
        return [
            self._execute_remote_single_worker(
                worker, method_name, *(arg[rank] for arg in args), **{key: value[rank] for key, value in kwargs.items()}
            )
            for rank, worker in enumerate(self._workers)
        ]

    def execute_all_async(self, method_name: str, *args, **kwargs) -> list:
        """Run on every worker; arguments that are all lists of ``world_size`` values are split per rank."""
        per_rank_values = [*args, *kwargs.values()]
        if per_rank_values and all(
            isinstance(value, list) and len(value) == self.world_size for value in per_rank_values
        ):
            return self._execute_per_rank(method_name, args, kwargs)
        return [self._execute_remote_single_worker(worker, method_name, *args, **kwargs) for worker in self._workers]

    def execute_all_sync(self, method_name: str, *args, **kwargs) -> list:
        """:meth:`execute_all_async` and wait; errors name the failing rank."""
        refs = self.execute_all_async(method_name, *args, **kwargs)
        return self._get_results(refs, list(range(len(refs))), method_name)

    def execute_all(self, method_name: str, *args, **kwargs) -> list:
        return self.execute_all_async(method_name, *args, **kwargs)

    def execute_rank_zero_async(self, method_name: str, *args, **kwargs):
        return self._execute_remote_single_worker(self._workers[0], method_name, *args, **kwargs)

    def execute_rank_zero_sync(self, method_name: str, *args, **kwargs):
        return self._get_results([self.execute_rank_zero_async(method_name, *args, **kwargs)], [0], method_name)[0]

    def execute_rank_zero(self, method_name: str, *args, **kwargs):
        return self.execute_rank_zero_async(method_name, *args, **kwargs)

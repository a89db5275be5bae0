"""Backend-independent worker group: resource pools, deferred class construction, method binding.

``WorkerGroup._bind_worker_method`` turns every ``@register``-ed method of the worker class into a driver-side
callable ``dispatch → execute → collect`` (see :mod:`verl.single_controller.base.decorator`). Backends (Ray) supply
``execute_all``, ``execute_rank_zero`` and ``_get_results``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verl.single_controller.base.decorator import (
    MAGIC_ATTR,
    Dispatch,
    Execute,
    _padding_size_key,
    get_predefined_dispatch_fn,
    get_predefined_execute_fn,
)
from verl.single_controller.base.future import DataProtoFuture


class ResourcePool:
    """How many worker processes go on each node: ``process_on_nodes[i]`` on node i."""

    def __init__(
        self, process_on_nodes: list[int] | None = None, max_colocate_count: int = 10, n_gpus_per_node: int = 8
    ) -> None:
        process_on_nodes = list(process_on_nodes or [])
        bad = [count for count in process_on_nodes if not isinstance(count, int) or count <= 0]
        if bad:
            raise ValueError(f"process_on_nodes must hold positive ints (processes per node), got {process_on_nodes}")
        if max_colocate_count < 1:
            raise ValueError(f"max_colocate_count must be >= 1, got {max_colocate_count}")
        self._store = process_on_nodes
        self.max_colocate_count = max_colocate_count
        self.n_gpus_per_node = n_gpus_per_node

    def add_node(self, process_count: int) -> None:
        self._store.append(process_count)

    @property
    def world_size(self) -> int:
        """Total number of worker processes."""
        return sum(self._store)

    def __call__(self) -> list[int]:
        return self._store

    @property
    def store(self) -> list[int]:
        return self._store

    def local_world_size_list(self) -> list[int]:
        """For every process, the number of processes on its node."""
        return [count for count in self._store for _ in range(count)]

    def local_rank_list(self) -> list[int]:
        """For every process, its index on its node."""
        return [local_rank for count in self._store for local_rank in range(count)]


class ClassWithInitArgs:
    """A class and the arguments to construct it with, built later (remotely) by the worker group."""

    def __init__(self, cls: type, *args, **kwargs) -> None:
        self.cls = cls
        self.args = args
        self.kwargs = kwargs

    def __call__(self) -> Any:
        return self.cls(*self.args, **self.kwargs)


def _unpad(output: Any, pad_size: int) -> Any:
    from verl.protocol import DataProto, unpad_dataproto

    if isinstance(output, DataProto):
        return unpad_dataproto(output, pad_size)
    if isinstance(output, DataProtoFuture) and output.dispatch_fn is None:
        return DataProtoFuture.concat_unpadded(output.futures, pad_size)
    return output


def _check_per_rank(method_name: str, world_size: int, args: tuple, kwargs: dict) -> None:
    for name, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
        if not isinstance(value, (list, tuple)) or len(value) != world_size:
            got = f"length {len(value)}" if isinstance(value, (list, tuple)) else type(value).__name__
            raise ValueError(
                f"{method_name}: after dispatch, {name} must be a list with one value per rank "
                f"(world_size={world_size}), got {got}; with ALL_TO_ALL / DP_COMPUTE pass per-rank lists"
            )


def func_generator(
    worker_group: WorkerGroup,
    method_name: str,
    dispatch_fn: Callable,
    collect_fn: Callable,
    execute_mode: Execute,
    blocking: bool,
) -> Callable:
    """The driver-side callable for one registered method: dispatch → execute → (wait) → collect → unpad."""

    def call(*args, **kwargs):
        args, kwargs = dispatch_fn(worker_group, *args, **kwargs)
        pad_size = kwargs.pop(_padding_size_key, 0)
        _check_per_rank(method_name, worker_group.world_size, args, kwargs)
        if execute_mode is Execute.RANK_ZERO:
            ranks = [0]
            rank_zero_kwargs = {key: value[0] for key, value in kwargs.items()}
            refs = [worker_group.execute_rank_zero(method_name, *(arg[0] for arg in args), **rank_zero_kwargs)]
        else:
            ranks = list(range(worker_group.world_size))
            refs = worker_group._execute_per_rank(method_name, args, kwargs)
        outputs = worker_group._get_results(refs, ranks, method_name) if blocking else refs
        output = outputs[0] if execute_mode is Execute.RANK_ZERO else collect_fn(worker_group, outputs)
        return _unpad(output, pad_size) if pad_size else output

    call.__name__ = method_name
    call.__qualname__ = f"{type(worker_group).__name__}.{method_name}"
    return call


class WorkerGroup:
    """A set of workers of one class driven as one object; subclasses provide the backend."""

    def __init__(self, resource_pool: ResourcePool | None, **kwargs) -> None:
        self._is_init_with_detached_workers = resource_pool is None
        self._workers: list = []
        self._worker_names: list[str] = []
        # Mesh-aware dispatch caches: mesh name -> per-rank dp rank / is_collect.
        self._dispatch_info: dict[str, list] = {}
        self._collect_info: dict[str, list] = {}

    @property
    def world_size(self) -> int:
        """Number of workers."""
        return len(self._workers)

    def _execute_per_rank(self, method_name: str, args: tuple, kwargs: dict) -> list:
        raise NotImplementedError

    def _get_results(self, refs: list, ranks: list[int], method_name: str) -> list:
        raise NotImplementedError

    def execute_rank_zero(self, method_name: str, *args, **kwargs):
        raise NotImplementedError

    def _bind_worker_method(self, user_defined_cls: type, func_generator: Callable = func_generator) -> list[str]:
        """Expose every ``@register``-ed method of ``user_defined_cls`` on this group; returns their names."""
        method_names = []
        for method_name in dir(user_defined_cls):
            try:
                method = getattr(user_defined_cls, method_name)
            except AttributeError:
                continue
            if not callable(method) or not hasattr(method, MAGIC_ATTR):
                continue
            attrs = getattr(method, MAGIC_ATTR)
            dispatch_mode = attrs["dispatch_mode"]
            if isinstance(dispatch_mode, Dispatch):
                fns = get_predefined_dispatch_fn(dispatch_mode)
            else:
                fns = dispatch_mode
            execute_mode = attrs["execute_mode"]
            get_predefined_execute_fn(execute_mode)
            if method_name in vars(type(self)) or any(method_name in vars(base) for base in type(self).__mro__[1:]):
                raise ValueError(
                    f"worker method {method_name!r} would hide the worker group's own attribute; rename it"
                )
            bound = func_generator(
                self,
                method_name,
                dispatch_fn=fns["dispatch_fn"],
                collect_fn=fns["collect_fn"],
                execute_mode=execute_mode,
                blocking=attrs["blocking"],
            )
            setattr(self, method_name, bound)
            method_names.append(method_name)
        return method_names

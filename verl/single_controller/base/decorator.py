"""``@register``: how a worker method is called from the driver (dispatch → execute → collect).

A worker-group call runs ``dispatch_fn(worker_group, *args, **kwargs)``, which returns per-rank argument lists
(every positional and keyword argument becomes a list of ``world_size`` values, the i-th going to rank i); the
execute mode runs the method on all ranks (``Execute.ALL``) or on rank 0 only (``Execute.RANK_ZERO``); then
``collect_fn(worker_group, outputs)`` turns the per-rank outputs into what the driver gets back.

Dispatch modes (verl's names):

- ``ONE_TO_ALL``: every rank gets the same arguments; the driver gets the list of the ranks' outputs.
- ``ALL_TO_ALL``: each argument is already a list of ``world_size`` values; outputs as a list.
- ``RANK_ZERO``: the arguments go to rank 0 (use with ``Execute.RANK_ZERO``); the driver gets rank 0's output.
- ``DP_COMPUTE``: like ``ALL_TO_ALL``, with the list lengths checked; outputs as a list.
- ``DP_COMPUTE_PROTO``: DataProto arguments are padded to a multiple of ``world_size`` and chunked; the outputs are
  concatenated and the padding rows removed.
- ``DP_COMPUTE_PROTO_WITH_FUNC``: the first argument is a function given to every rank, the rest as above.
- ``DP_COMPUTE_METRIC``: DataProto arguments chunked as above; the outputs (e.g. metric dicts) come back as a list.
- ``make_nd_compute_dataproto_dispatch_fn(mesh_name)``: the mesh-aware mode. DataProtos are chunked by data-parallel
  rank on the named mesh (as registered by each worker with ``_register_dispatch_collect_info``); tensor- or
  sequence-parallel peers get the same chunk, and only one rank per data-parallel group (``is_collect``) is collected.

New modes: ``register_dispatch_mode("NAME", dispatch_fn, collect_fn)`` adds ``Dispatch.NAME``;
``update_dispatch_mode`` replaces the functions of an existing mode; a dict ``{"dispatch_fn", "collect_fn"}`` can
also be passed directly as ``dispatch_mode``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial, wraps
from types import FunctionType
from typing import Any

from verl.single_controller.base.dynamic_enum import DynamicEnum
from verl.single_controller.base.future import DataProtoFuture
from verl.single_controller.base.own_device import enter_own_device

# A name no user method attribute would carry: marks a method as registered and holds its modes.
MAGIC_ATTR = "attrs_3141562937"
# Keyword a dispatch function adds to tell the worker group how many padding rows to drop after collect.
_padding_size_key = "_padding_size_key_x123d"


class Dispatch(DynamicEnum):
    """How arguments are split across ranks and outputs joined (see the module docstring)."""

    _registry: dict = {}
    _next_value = 0


class Execute(DynamicEnum):
    """Which ranks run the method: ``ALL`` or ``RANK_ZERO``."""

    _registry: dict = {}
    _next_value = 0


for _mode in (
    "RANK_ZERO",
    "ONE_TO_ALL",
    "ALL_TO_ALL",
    "DP_COMPUTE",
    "DP_COMPUTE_PROTO",
    "DP_COMPUTE_PROTO_WITH_FUNC",
    "DP_COMPUTE_METRIC",
    "DIRECT_ROLLOUT_METHOD",
):
    Dispatch.register(_mode)
Execute.register("ALL")
Execute.register("RANK_ZERO")


# ---------------------------------------------------------------------------------------------- splitting helpers


def _is_data_proto(value: Any) -> bool:
    from verl.protocol import DataProto

    return isinstance(value, DataProto)


def _check_chunkable(value: Any, where: str) -> None:
    if not (_is_data_proto(value) or isinstance(value, DataProtoFuture)):
        raise TypeError(f"{where}: expected a DataProto or DataProtoFuture, got {type(value).__name__}")


def _split_data_protos(chunks: int, args: tuple, kwargs: dict, pad: bool = True) -> tuple[list, dict]:
    """Chunk every DataProto/DataProtoFuture argument into ``chunks`` parts, padding DataProtos that don't divide.

    All DataProto arguments must have the same length (they are rows of the same batch). The number of padding rows
    is stored under ``_padding_size_key`` in the returned kwargs.
    """
    from verl.protocol import pad_dataproto_to_divisor

    lengths = {len(v) for v in (*args, *kwargs.values()) if _is_data_proto(v)}
    if len(lengths) > 1:
        raise ValueError(f"DataProto arguments of one call must have the same length, got lengths {sorted(lengths)}")
    pad_size = 0

    def split(value: Any, where: str) -> list:
        nonlocal pad_size
        _check_chunkable(value, where)
        if pad and _is_data_proto(value):
            value, pad_size = pad_dataproto_to_divisor(value, chunks)
        return value.chunk(chunks=chunks)

    split_args = [split(arg, f"argument {i}") for i, arg in enumerate(args)]
    split_kwargs = {key: split(value, f"argument {key!r}") for key, value in kwargs.items()}
    if pad_size:
        split_kwargs[_padding_size_key] = pad_size
    return split_args, split_kwargs


def _concat_outputs(outputs: list) -> Any:
    """Join per-rank outputs: DataProtos are concatenated; ObjectRefs (non-blocking) become a DataProtoFuture."""
    import ray

    from verl.protocol import DataProto

    if all(isinstance(o, DataProto) for o in outputs):
        return DataProto.concat(outputs)
    if all(isinstance(o, ray.ObjectRef) for o in outputs):
        return DataProtoFuture.concat(outputs)
    kinds = sorted({type(o).__name__ for o in outputs})
    raise TypeError(f"expected every rank to return a DataProto (or all to be pending ObjectRefs), got {kinds}")


# ---------------------------------------------------------------------------------------------- predefined modes


def dispatch_one_to_all(worker_group, *args, **kwargs):
    """Every rank gets every argument unchanged."""
    n = worker_group.world_size
    return tuple([arg] * n for arg in args), {key: [value] * n for key, value in kwargs.items()}


def dispatch_all_to_all(worker_group, *args, **kwargs):
    """Arguments are already per-rank lists."""
    return args, kwargs


def collect_all_to_all(worker_group, output):
    """The list of per-rank outputs, in rank order."""
    return output


def dummy_direct_rollout_call(worker_group, *args, **kwargs):
    """``DIRECT_ROLLOUT_METHOD`` methods are called on the rollout engine's own actors, never through a group."""
    raise NotImplementedError("methods registered with Dispatch.DIRECT_ROLLOUT_METHOD cannot be called via a group")


def collect_rank_zero(worker_group, output):
    """Rank 0's output alone."""
    return output[0]


def dispatch_dp_compute(worker_group, *args, **kwargs):
    """Arguments are per-rank lists of exactly ``world_size`` values."""
    n = worker_group.world_size
    for name, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
        if not isinstance(value, (list, tuple)) or len(value) != n:
            got = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
            raise ValueError(f"DP_COMPUTE: {name} must be a list of world_size={n} values, got {got}")
    return args, kwargs


def collect_dp_compute(worker_group, output):
    """The per-rank outputs, one per rank."""
    if len(output) != worker_group.world_size:
        raise ValueError(f"DP_COMPUTE: expected {worker_group.world_size} outputs, got {len(output)}")
    return output


def dispatch_dp_compute_data_proto(worker_group, *args, **kwargs):
    """Pad every DataProto argument to a multiple of ``world_size`` and give rank i its i-th chunk."""
    return _split_data_protos(worker_group.world_size, args, kwargs)


def dispatch_dp_compute_data_proto_with_func(worker_group, *args, **kwargs):
    """The first argument is a function sent to every rank; the rest are chunked like ``DP_COMPUTE_PROTO``."""
    if not args or not isinstance(args[0], FunctionType):
        raise TypeError("DP_COMPUTE_PROTO_WITH_FUNC: the first argument must be a function")
    split_args, split_kwargs = _split_data_protos(worker_group.world_size, args[1:], kwargs)
    return [[args[0]] * worker_group.world_size, *split_args], split_kwargs


def collect_dp_compute_data_proto(worker_group, output):
    """Concatenate the ranks' DataProtos (or make a DataProtoFuture of pending outputs)."""
    return _concat_outputs(collect_dp_compute(worker_group, output))


def _mesh_info(worker_group, cache_name: str, query_name: str, mesh_name: str) -> list:
    cache = getattr(worker_group, cache_name)
    if mesh_name not in cache:
        info = getattr(worker_group, query_name)(mesh_name)
        missing = [rank for rank, value in enumerate(info) if value is None]
        if missing:
            raise RuntimeError(
                f"mesh {mesh_name!r}: ranks {missing} have not registered it; call "
                f"self._register_dispatch_collect_info({mesh_name!r}, dp_rank=..., is_collect=...) in the worker "
                "(e.g. in init_model) before calling a method dispatched on this mesh"
            )
        cache[mesh_name] = info
    return cache[mesh_name]


def dispatch_nd_compute_dataproto(mesh_name: str, worker_group, *args, **kwargs):
    """Chunk DataProtos into ``dp_size`` parts; each rank gets the chunk of its data-parallel rank on ``mesh_name``."""
    dp_rank_of = _mesh_info(worker_group, "_dispatch_info", "_query_dispatch_info", mesh_name)
    dp_size = max(dp_rank_of) + 1
    split_args, split_kwargs = _split_data_protos(dp_size, args, kwargs)
    ranks = range(worker_group.world_size)
    per_rank_args = tuple([chunks[dp_rank_of[rank]] for rank in ranks] for chunks in split_args)
    per_rank_kwargs = {
        key: value if key == _padding_size_key else [value[dp_rank_of[rank]] for rank in ranks]
        for key, value in split_kwargs.items()
    }
    return per_rank_args, per_rank_kwargs


def collect_nd_compute_dataproto(mesh_name: str, worker_group, output):
    """Concatenate, in data-parallel order, the outputs of the one collecting rank of each data-parallel group."""
    dp_rank_of = _mesh_info(worker_group, "_dispatch_info", "_query_dispatch_info", mesh_name)
    is_collect = _mesh_info(worker_group, "_collect_info", "_query_collect_info", mesh_name)
    collected = {dp_rank_of[rank]: out for rank, out in enumerate(output) if is_collect[rank]}
    dp_size = max(dp_rank_of) + 1
    collecting_ranks = [rank for rank in range(len(output)) if is_collect[rank]]
    if sorted(collected) != list(range(dp_size)) or len(collecting_ranks) != dp_size:
        raise RuntimeError(
            f"mesh {mesh_name!r}: exactly one rank per data-parallel group must have is_collect=True; "
            f"dp ranks {dp_rank_of}, is_collect {is_collect}"
        )
    return _concat_outputs([collected[dp_rank] for dp_rank in range(dp_size)])


def make_nd_compute_dataproto_dispatch_fn(mesh_name: str) -> dict[str, Callable]:
    """The mesh-aware dispatch mode for ``@register(dispatch_mode=...)``: split by dp rank on ``mesh_name``."""
    return {
        "dispatch_fn": partial(dispatch_nd_compute_dataproto, mesh_name),
        "collect_fn": partial(collect_nd_compute_dataproto, mesh_name),
    }


DISPATCH_MODE_FN_REGISTRY: dict[Dispatch, dict[str, Callable]] = {
    Dispatch.RANK_ZERO: {"dispatch_fn": dispatch_one_to_all, "collect_fn": collect_rank_zero},
    Dispatch.ONE_TO_ALL: {"dispatch_fn": dispatch_one_to_all, "collect_fn": collect_all_to_all},
    Dispatch.ALL_TO_ALL: {"dispatch_fn": dispatch_all_to_all, "collect_fn": collect_all_to_all},
    Dispatch.DP_COMPUTE: {"dispatch_fn": dispatch_dp_compute, "collect_fn": collect_dp_compute},
    Dispatch.DP_COMPUTE_PROTO: {
        "dispatch_fn": dispatch_dp_compute_data_proto,
        "collect_fn": collect_dp_compute_data_proto,
    },
    Dispatch.DP_COMPUTE_PROTO_WITH_FUNC: {
        "dispatch_fn": dispatch_dp_compute_data_proto_with_func,
        "collect_fn": collect_dp_compute_data_proto,
    },
    Dispatch.DP_COMPUTE_METRIC: {"dispatch_fn": dispatch_dp_compute_data_proto, "collect_fn": collect_dp_compute},
    Dispatch.DIRECT_ROLLOUT_METHOD: {"dispatch_fn": dummy_direct_rollout_call, "collect_fn": dummy_direct_rollout_call},
}


def get_predefined_dispatch_fn(dispatch_mode: Dispatch) -> dict[str, Callable]:
    """The ``{"dispatch_fn", "collect_fn"}`` pair of a registered mode."""
    if dispatch_mode not in DISPATCH_MODE_FN_REGISTRY:
        names = sorted(mode.name for mode in DISPATCH_MODE_FN_REGISTRY)
        raise KeyError(f"dispatch mode {dispatch_mode!r} has no functions; registered: {names}")
    return DISPATCH_MODE_FN_REGISTRY[dispatch_mode]


def register_dispatch_mode(dispatch_mode_name: str, dispatch_fn: Callable, collect_fn: Callable) -> Dispatch:
    """Add ``Dispatch.<dispatch_mode_name>`` backed by ``dispatch_fn`` / ``collect_fn``; returns the new member."""
    if dispatch_mode_name in Dispatch:
        raise ValueError(f"dispatch mode {dispatch_mode_name!r} already exists; use update_dispatch_mode to change it")
    dispatch_mode = Dispatch.register(dispatch_mode_name)
    DISPATCH_MODE_FN_REGISTRY[dispatch_mode] = {"dispatch_fn": dispatch_fn, "collect_fn": collect_fn}
    return dispatch_mode


def update_dispatch_mode(dispatch_mode: Dispatch, dispatch_fn: Callable, collect_fn: Callable) -> None:
    """Replace the functions of an existing dispatch mode."""
    get_predefined_dispatch_fn(dispatch_mode)
    DISPATCH_MODE_FN_REGISTRY[dispatch_mode] = {"dispatch_fn": dispatch_fn, "collect_fn": collect_fn}


def get_predefined_execute_fn(execute_mode: Execute) -> dict[str, str]:
    """Name of the worker-group method that runs an execute mode."""
    names = {Execute.ALL: "execute_all", Execute.RANK_ZERO: "execute_rank_zero"}
    if execute_mode not in names:
        raise KeyError(f"execute mode {execute_mode!r} is unknown; registered: {[m.name for m in names]}")
    return {"execute_fn_name": names[execute_mode]}


def _check_dispatch_mode(dispatch_mode: Any) -> None:
    if isinstance(dispatch_mode, Dispatch):
        return
    if isinstance(dispatch_mode, dict):
        missing = [key for key in ("dispatch_fn", "collect_fn") if key not in dispatch_mode]
        if missing:
            raise ValueError(f"a dict dispatch_mode needs the keys 'dispatch_fn' and 'collect_fn'; missing {missing}")
        return
    raise TypeError(f"dispatch_mode must be a Dispatch member or a dict, got {dispatch_mode!r}")


def _check_execute_mode(execute_mode: Any) -> None:
    if not isinstance(execute_mode, Execute):
        raise TypeError(f"execute_mode must be an Execute member, got {execute_mode!r}")


def _materialize_futures(*args, **kwargs) -> tuple[tuple, dict]:
    """Replace every DataProtoFuture argument by its value (runs inside the worker)."""
    args = tuple(arg.get() if isinstance(arg, DataProtoFuture) else arg for arg in args)
    kwargs = {key: value.get() if isinstance(value, DataProtoFuture) else value for key, value in kwargs.items()}
    return args, kwargs


def register(
    dispatch_mode: Dispatch | dict = Dispatch.ALL_TO_ALL,
    execute_mode: Execute = Execute.ALL,
    blocking: bool = True,
    materialize_futures: bool = True,
) -> Callable:
    """Mark a worker method as callable from the worker group.

    Args:
        dispatch_mode: a ``Dispatch`` member or ``{"dispatch_fn": ..., "collect_fn": ...}``.
        execute_mode: ``Execute.ALL`` or ``Execute.RANK_ZERO``.
        blocking: ``False`` returns at once with ObjectRefs / a ``DataProtoFuture`` that later calls accept.
        materialize_futures: resolve ``DataProtoFuture`` arguments in the worker before the method runs.
    """
    _check_dispatch_mode(dispatch_mode)
    _check_execute_mode(execute_mode)

    def decorator(func: Callable) -> Callable:
        @wraps(func)
        def inner(*args, **kwargs):
            enter_own_device()  # Ray may run this in another thread than __init__'s (own_device.py)
            if materialize_futures:
                args, kwargs = _materialize_futures(*args, **kwargs)
            return func(*args, **kwargs)

        @wraps(func)
        async def async_inner(*args, **kwargs):
            enter_own_device()
            if materialize_futures:
                args, kwargs = _materialize_futures(*args, **kwargs)
            return await func(*args, **kwargs)

        wrapper = async_inner if inspect.iscoroutinefunction(func) else inner
        attrs = {"dispatch_mode": dispatch_mode, "execute_mode": execute_mode, "blocking": blocking}
        setattr(wrapper, MAGIC_ATTR, attrs)
        return wrapper

    return decorator

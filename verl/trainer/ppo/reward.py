"""Building the reward function from the config and applying it to a batch.

Config keys (verl's): ``reward_model.reward_manager`` (a registered name), ``reward_model.reward_kwargs``
(extra constructor arguments), ``custom_reward_function.path`` / ``.name`` / ``.reward_kwargs`` (a user
scoring function), ``data.reward_fn_key`` (the non-tensor key naming each sample's data source).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from omegaconf import DictConfig

from verl.protocol import DataProto
from verl.trainer.config.root import PPOConfig
from verl.utils.config import as_typed_config

SAMPLE_ARGUMENTS = ("data_source", "solution_str", "ground_truth", "extra_info")
BATCH_ARGUMENTS = ("data_sources", "solution_strs", "ground_truths", "extra_infos")


def _kwargs_dict(value: Any) -> dict[str, Any]:
    """A DictConfig / dataclass / dict of keyword arguments as a plain dict."""
    if value is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(value, DictConfig):
            return dict(OmegaConf.to_container(value, resolve=True))
    except ImportError:
        pass
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    return dict(value)


def check_reward_fn_signature(fn: Callable, argument_names: tuple[str, ...], where: str, extra: dict) -> None:
    """Fail unless ``fn`` accepts ``argument_names`` (and ``extra``) as keyword arguments."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: trust them
    try:
        signature.bind(**dict.fromkeys(argument_names), **extra)
    except TypeError as exc:
        raise TypeError(
            f"{where} has signature {signature}, but reward functions are called as "
            f"fn({', '.join(f'{a}=...' for a in argument_names)}"
            f"{', ' + ', '.join(extra) if extra else ''}): {exc}. Accept these names (or **kwargs)."
        ) from None


def _pickle_by_value(module) -> None:
    """Send the file's functions to other processes by value: a Ray actor (``launch_reward_fn_async``) cannot import
    the synthetic module name the file was loaded under."""
    for pickler in ("ray.cloudpickle", "cloudpickle"):
        try:
            importlib.import_module(pickler).register_pickle_by_value(module)
        except ImportError:
            continue


def get_custom_reward_fn(config: Any) -> Callable | None:
    """Load ``custom_reward_function.name`` from the file ``custom_reward_function.path`` (None when unset).

    The function must accept ``(data_source, solution_str, ground_truth, extra_info)`` as keywords
    (the plural names for the ``batch`` manager) plus ``custom_reward_function.reward_kwargs``, which are
    bound to it.
    """
    section = config.custom_reward_function
    if not section.path:
        return None
    name = section.name
    path = section.path
    path = os.path.expanduser(str(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"custom_reward_function.path={path!r} is not a file; point it at a .py file.")
    module_name = f"custom_reward_module_{abs(hash(os.path.abspath(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"custom_reward_function.path={path!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # so worker processes can unpickle the function by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ImportError(f"importing custom_reward_function.path={path!r} failed: {exc!r}") from exc
    _pickle_by_value(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        available = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise AttributeError(
            f"custom_reward_function.name={name!r} is not a function in {path!r}; functions there: {available}"
        )
    reward_kwargs = _kwargs_dict(section.reward_kwargs)
    # evaluation configs have no reward_model section: they score sample by sample
    batched = "reward_model" in config and config.reward_model.reward_manager == "batch"
    arguments = BATCH_ARGUMENTS if batched else SAMPLE_ARGUMENTS
    check_reward_fn_signature(fn, arguments, f"custom_reward_function {name!r} in {path!r}", reward_kwargs)
    print(f"using custom reward function {name!r} from {path!r}")
    return functools.wraps(fn)(functools.partial(fn, **reward_kwargs)) if reward_kwargs else fn


def _fill_overlong_settings(manager_cls: type, kwargs: dict[str, Any], config: PPOConfig) -> dict:
    """For managers taking ``overlong_buffer_cfg`` / ``max_resp_len`` (DAPO's), default them from
    ``reward_model.overlong_buffer`` and ``data.max_response_length``; explicit reward_kwargs win."""
    parameters = inspect.signature(manager_cls.__init__).parameters
    if "overlong_buffer_cfg" in parameters and "overlong_buffer_cfg" not in kwargs:
        kwargs["overlong_buffer_cfg"] = _kwargs_dict(config.reward_model.overlong_buffer)
    if "max_resp_len" in parameters and "max_resp_len" not in kwargs:
        kwargs["max_resp_len"] = config.data.max_response_length
    return kwargs


def load_reward_manager(config: PPOConfig | DictConfig, tokenizer, num_examine: int, **reward_kwargs: Any):
    """Build the manager named by ``reward_model.reward_manager`` with the custom or default scoring function.

    Constructor arguments: ``tokenizer, num_examine, compute_score, reward_fn_key`` plus
    ``reward_model.reward_kwargs`` and ``reward_kwargs`` (the latter wins on a clash); a manager that takes
    ``overlong_buffer_cfg`` / ``max_resp_len`` gets ``reward_model.overlong_buffer`` /
    ``data.max_response_length`` unless those kwargs set them.
    """
    from verl.workers.reward_manager import get_reward_manager_cls

    config = as_typed_config(config, PPOConfig)
    manager_cls = get_reward_manager_cls(config.reward_model.reward_manager)
    kwargs = {**_kwargs_dict(config.reward_model.reward_kwargs), **reward_kwargs}
    kwargs = _fill_overlong_settings(manager_cls, kwargs, config)
    compute_score = get_custom_reward_fn(config)
    sandbox = config.reward_model.sandbox_fusion
    if compute_score is None and sandbox.url:
        from verl.utils.reward_score import default_compute_score

        compute_score = functools.partial(
            default_compute_score,
            sandbox_fusion_url=sandbox.url,
            concurrent_semaphore=sandbox.max_concurrent,
            memory_limit_mb=sandbox.memory_limit_mb,
        )
    manager = manager_cls(
        tokenizer=tokenizer,
        num_examine=num_examine,
        compute_score=compute_score,
        reward_fn_key=config.data.reward_fn_key,
        **kwargs,
    )
    from verl.workers.reward_manager.from_config import build_reward_fn, start_remote_sources

    reward_fn = build_reward_fn(config.reward_model, manager, tokenizer, config.data.reward_fn_key)
    start_remote_sources(reward_fn)
    return reward_fn


def compute_reward_with_metrics(data: DataProto, reward_fn: Callable) -> tuple[torch.Tensor, dict[str, list], dict]:
    """``(token_level_scores (bs, R), reward_extra_infos_dict, reward_metrics)``; the metrics (``reward/<source>/*``)
    come from a combined reward function and are empty for a plain reward manager."""
    result = reward_fn(data, return_dict=True)
    if isinstance(result, dict):
        return (
            result["reward_tensor"],
            dict(result.get("reward_extra_info", {})),
            dict(result.get("reward_metrics", {})),
        )
    return result, {}, {}


def compute_reward(data: DataProto, reward_fn: Callable) -> tuple[torch.Tensor, dict[str, list]]:
    """``(token_level_scores (bs, R), reward_extra_infos_dict)`` from a reward manager."""
    scores, extra_info, _ = compute_reward_with_metrics(data, reward_fn)
    return scores, extra_info


class _RewardWorker:
    """Holds a copy of the reward function in its own process and applies it to the batches it is sent."""

    def __init__(self, reward_fn: Callable):
        self.reward_fn = reward_fn

    def compute(self, data: DataProto) -> tuple[torch.Tensor, dict[str, list], dict]:
        return compute_reward_with_metrics(data, self.reward_fn)


_REWARD_WORKERS: list[tuple[Callable, str, Any]] = []
"""``(reward_fn, Ray job id, actor)``: one long-lived actor per reward function and Ray session, started on its first
async call."""


def compute_reward_async(data: DataProto, reward_fn: Callable):
    """``compute_reward_with_metrics`` in another process (``reward_model.launch_reward_fn_async``); returns the
    object ref of its result. The reward function is sent once, to a long-lived actor (a fresh Ray task per step
    would pay a worker start and the function's transfer every step)."""
    import ray

    job = ray.get_runtime_context().get_job_id()
    for known_fn, known_job, actor in _REWARD_WORKERS:
        if known_fn is reward_fn and known_job == job:
            return actor.compute.remote(data)
    # no logical CPU: on a small machine the training pool's placement groups may hold all of them; restarts and
    # retries: a process killed from outside (the node's OOM killer) must not end the run
    actor = ray.remote(num_cpus=0, max_restarts=2, max_task_retries=2)(_RewardWorker).remote(reward_fn)
    _REWARD_WORKERS[:] = [entry for entry in _REWARD_WORKERS if entry[1] == job] + [(reward_fn, job, actor)]
    return actor.compute.remote(data)


def rows_in_order(
    scores: torch.Tensor, extra_info: dict[str, list], order: Any
) -> tuple[torch.Tensor, dict[str, list]]:
    """Reward results computed on a batch, for the same rows after a reorder: row ``j`` of the result is row
    ``order[j]`` of the input (``order`` is the original position of each current row)."""
    index = [int(i) for i in order]
    extra = {key: [values[i] for i in index] for key, values in extra_info.items() if len(values) == len(index)}
    return scores[torch.as_tensor(index, dtype=torch.long)], extra

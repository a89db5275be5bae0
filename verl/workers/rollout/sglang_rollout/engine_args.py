"""Keyword arguments of the ``sglang.Engine`` built from the rollout config, and the GPUs it runs on.

SGLang's engine keeps the model in scheduler subprocesses, one per GPU of a tensor-parallel group, launched by the
first worker of the group; every worker's GPU is one scheduler's GPU (the same device, so weights can move by
CUDA IPC from the worker's FSDP module to the scheduler's model).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch
import torch.distributed as dist

from verl.workers.rollout.engine_kwargs import backend_kwargs, check_kwarg_names
from verl.workers.rollout.process_group import TensorParallelLayout, free_port

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
LOAD_FORMAT_ALIASES = {"dummy_dtensor": "dummy", "dummy_hf": "dummy", "dummy_megatron": "dummy", "hf": "auto",
                       "dtensor": "auto"}  # fmt: skip
"""verl's ``rollout.load_format`` spellings -> SGLang's ``load_format``."""


def server_arg_names() -> set[str]:
    """Argument names of ``sglang.Engine`` (the ``ServerArgs`` dataclass fields)."""
    from sglang.srt.server_args import ServerArgs

    return {f.name for f in dataclasses.fields(ServerArgs)}


def build_engine_kwargs(
    config: Any, model_path: str, trust_remote_code: bool, layout: TensorParallelLayout
) -> dict[str, Any]:
    """``sglang.Engine(**kwargs)`` for the rollout config (the keys map as the config's docstrings say).

    The engine takes token ids and returns token ids (``skip_tokenizer_init``); ``context_length`` defaults to
    ``prompt_length + response_length``; the memory saver is on when ``free_cache_engine`` is set, so the engine can
    release its weights, KV cache and CUDA graphs while the actor trains. ``sleep_on_idle`` is on where this SGLang has
    it: a colocated engine is idle for the whole training half of a step, and its scheduler would otherwise spin a CPU
    core polling for requests (it wakes on the request socket, so generation loses nothing). GPUs are numbered within
    the ``CUDA_VISIBLE_DEVICES`` the engine is launched with (see :func:`group_visible_devices`): scheduler ``i`` runs
    on the GPU of the group's ``i``-th worker. ``engine_kwargs.sglang`` entries override everything; an unknown one
    fails naming the nearest SGLang argument.
    """
    user_kwargs = backend_kwargs(config, "sglang")
    known = server_arg_names()
    check_kwarg_names(user_kwargs, known, "sglang", "sglang's ServerArgs")
    max_model_len = config.max_model_len or config.prompt_length + config.response_length
    kwargs: dict[str, Any] = dict(
        model_path=model_path,
        dtype=DTYPE_NAMES.get(config.dtype, config.dtype),
        load_format=LOAD_FORMAT_ALIASES.get(config.load_format, config.load_format),
        trust_remote_code=trust_remote_code,
        skip_tokenizer_init=True,
        context_length=max_model_len,
        mem_fraction_static=config.gpu_memory_utilization,
        max_running_requests=config.max_num_seqs,
        chunked_prefill_size=config.max_num_batched_tokens if config.enable_chunked_prefill else -1,
        disable_radix_cache=not config.enable_prefix_caching,
        disable_cuda_graph=config.enforce_eager,
        enable_memory_saver=config.free_cache_engine,
        tp_size=layout.size,
        base_gpu_id=0,
        gpu_id_step=1,
        random_seed=int(os.environ.get("RANK", "0")) // layout.size,
        port=free_port(),
        nccl_port=free_port(),
        log_level="error",
    )
    if "sleep_on_idle" in known:
        kwargs["sleep_on_idle"] = True
    kwargs.update(user_kwargs)
    return kwargs


def physical_gpu() -> str:
    """This process's GPU as the host numbers it (its entry of ``CUDA_VISIBLE_DEVICES``, or the device index)."""
    index = torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        return visible.split(",")[index].strip()
    return str(index)


def group_visible_devices(cpu_group) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the engine: the group's GPUs in rank order (a collective over ``cpu_group``;
    a 1-rank group gives this process's GPU)."""
    own = physical_gpu()
    if cpu_group is None:
        return own
    gpus: list[Any] = [None] * dist.get_world_size(cpu_group)
    dist.all_gather_object(gpus, own, group=cpu_group)
    return ",".join(gpus)

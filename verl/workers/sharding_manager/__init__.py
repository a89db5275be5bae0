"""Weight sync between the training engine and the rollout engine ("enter / leave rollout mode")."""

from verl.workers.sharding_manager.base import BaseShardingManager
from verl.workers.sharding_manager.hf import HFShardingManager
from verl.workers.sharding_manager.memory import memory_metrics

__all__ = [
    "BaseShardingManager",
    "HFShardingManager",
    "FSDPVLLMShardingManager",
    "FSDPSGLangShardingManager",
    "memory_metrics",
]


def __getattr__(name: str):
    if name == "FSDPVLLMShardingManager":  # lazy: importing it must not import vLLM
        from verl.workers.sharding_manager.fsdp_vllm import FSDPVLLMShardingManager

        return FSDPVLLMShardingManager
    if name == "FSDPSGLangShardingManager":
        from verl.workers.sharding_manager.fsdp_sglang import FSDPSGLangShardingManager

        return FSDPSGLangShardingManager
    raise AttributeError(name)

"""Rollout backends (``hf``, ``vllm``) behind one interface, chosen by ``actor_rollout_ref.rollout.name``."""

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.builder import build_rollout
from verl.workers.rollout.registry import get_rollout_class, register_rollout

__all__ = ["BaseRollout", "build_rollout", "get_rollout_class", "register_rollout", "HFRollout", "vLLMRollout"]


def __getattr__(name: str):
    if name == "HFRollout":
        from verl.workers.rollout.hf_rollout import HFRollout

        return HFRollout
    if name == "vLLMRollout":  # lazy: importing vLLM takes seconds
        from verl.workers.rollout.vllm_rollout import vLLMRollout

        return vLLMRollout
    raise AttributeError(name)

"""Rollout backends (``hf``, ``vllm``, ``sglang``) behind one interface, picked by ``rollout.name``."""

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.builder import build_rollout
from verl.workers.rollout.registry import get_rollout_class, register_rollout, registered_rollout_names

__all__ = [
    "BaseRollout",
    "build_rollout",
    "get_rollout_class",
    "register_rollout",
    "registered_rollout_names",
    "HFRollout",
    "vLLMRollout",
    "SGLangRollout",
]

_LAZY = {  # importing vLLM or SGLang takes seconds: only on first use
    "HFRollout": "verl.workers.rollout.hf_rollout",
    "vLLMRollout": "verl.workers.rollout.vllm_rollout",
    "SGLangRollout": "verl.workers.rollout.sglang_rollout",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)

"""Rollout backends (``hf``, ``vllm``, ``sglang``) behind one interface, picked by ``rollout.name``.

Everything but the registry is imported on first use: config validation reads the registry without torch.
"""

from verl.workers.rollout.registry import ROLLOUT_REGISTRY, get_rollout_class, register_rollout

_LAZY = {
    "BaseRollout": "verl.workers.rollout.base",
    "build_rollout": "verl.workers.rollout.builder",
    "HFRollout": "verl.workers.rollout.hf_rollout",
    "vLLMRollout": "verl.workers.rollout.vllm_rollout",  # importing vLLM takes seconds
    "SGLangRollout": "verl.workers.rollout.sglang_rollout",  # SGLang itself is imported when one is built
}

__all__ = ["ROLLOUT_REGISTRY", "get_rollout_class", "register_rollout", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

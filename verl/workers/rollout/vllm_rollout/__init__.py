"""The ``vllm`` rollout backend (importing this package imports vLLM)."""

from verl.workers.rollout.vllm_rollout.vllm_rollout import vLLMRollout

__all__ = ["vLLMRollout"]

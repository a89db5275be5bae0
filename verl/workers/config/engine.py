"""FSDP2 training-engine config (``fsdp_config`` of the actor, reference and critic)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.workers.config.base import BaseConfig, bounded_field, choice_field

DTYPE_NAMES = ("fp32", "bf16", "fp16", "float32", "bfloat16", "float16")
"""Accepted spellings of parameter dtypes."""


@dataclass
class WrapPolicyConfig(BaseConfig):
    """Which submodules FSDP2 shards as their own units (``fully_shard`` per unit, then the root)."""

    transformer_layer_cls_to_wrap: list[str] | None = None
    """Class names of the units; null uses the model's ``_no_split_modules`` (its decoder layers); an empty list
    makes no layer units (as in verl), so with ``min_num_params`` 0 the root is the only unit: one all-gather and one
    reduce-scatter of the whole model per micro-batch instead of one per layer, with every layer's compute-dtype
    copy held from forward to backward."""

    min_num_params: int = bounded_field(0, ge=0)
    """Also shard, as its own unit, every other submodule with at least this many parameters; 0 adds none."""


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
    amx_bf16), many times slower elsewhere (bf16 compute on such a CPU logs a warning naming this key)."""


@dataclass
class EngineOffloadConfig(BaseConfig):
    """Where a training engine keeps its state between uses: the keys both engines (FSDP2, Megatron) share."""

    param_offload: bool = False
    """Keep the model's parameters in host memory between uses (moved to the device for each compute call)."""

    optimizer_offload: bool = False
    """Keep optimizer state in host memory between updates."""


@dataclass
class FSDPEngineConfig(EngineOffloadConfig):
    """How a model is sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``) and where its state lives."""

    wrap_policy: WrapPolicyConfig = field(default_factory=WrapPolicyConfig)
    """Which modules are sharded as units (each decoder layer by default)."""

    offload_policy: bool = False
    """Use FSDP2's ``CPUOffloadPolicy`` (parameters, gradients and optimizer step on the CPU; GPU only, where
    ``param_offload`` selects it too)."""

    reshard_after_forward: bool = True
    """Free gathered parameters after the forward pass (gather again for backward). False keeps them from a
    mini-batch's first forward to its last backward: one all-gather per mini-batch instead of two per micro-batch
    (and one per forward-only pass, freed at its end). On one H200 SmolLM2's compiled update ran 5-17% faster."""

    fsdp_size: int = -1
    """Ranks per sharding group; -1 shards over all ranks of the role."""

    forward_prefetch: bool = False
    """While a unit computes its forward pass, all-gather the next unit's parameters
    (``set_modules_to_forward_prefetch``)."""

    model_dtype: str = choice_field("fp32", DTYPE_NAMES)
    """Dtype the parameters are loaded and kept in."""

    mixed_precision: MixedPrecisionConfig | None = field(default_factory=MixedPrecisionConfig)
    """Mixed-precision dtypes on GPU; null computes in ``model_dtype`` throughout."""

    use_orig_params: bool = False
    """verl's FSDP1 switch between flat and original parameters. FSDP2 always shards the module's own parameters
    (as DTensors), so both values train the same way here and verl scripts that set it run unchanged."""

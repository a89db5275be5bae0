"""Hugging Face config -> megatron-core ``TransformerConfig`` keyword arguments (Llama and Qwen2 families).

The layer layout is megatron-core's local spec (``get_gpt_layer_local_spec``): RMSNorm, fused QKV projection,
SwiGLU MLP with a fused gate/up projection, no biases except Qwen2's QKV bias. Rotary embeddings are applied by
:mod:`verl.models.mcore.attention` with the Hugging Face model's own rotary class, so every RoPE variant that
transformers implements (default, llama3, linear, dynamic, yarn) carries over unchanged and megatron-core's
position embedding is off (``position_embedding_type="none"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "LlamaForTokenClassification",
    "Qwen2ForTokenClassification",
)
"""Hugging Face classes this build converts (causal LMs, and value models with a one-label head)."""

MODEL_TYPES = {"llama": {"qkv_bias": False}, "qwen2": {"qkv_bias": True}}
"""``config.model_type`` -> layout facts that differ between the families."""


@dataclass(frozen=True)
class ParallelSizes:
    """The parallel layout a model is built for (``1`` / ``None`` when unused)."""

    tensor: int = 1
    pipeline: int = 1
    virtual_pipeline: int | None = None
    sequence_parallel: bool = False


def _value(config: Any, name: str, default: Any = None) -> Any:
    return getattr(config, name, default)


def check_supported(hf_config: Any, sizes: ParallelSizes) -> list[str]:
    """Every reason ``hf_config`` cannot be built with ``sizes`` (empty when it can), each naming the fix."""
    errors = []
    model_type = _value(hf_config, "model_type")
    if model_type not in MODEL_TYPES:
        errors.append(
            f"model_type {model_type!r} is not supported by the megatron engine; supported: {sorted(MODEL_TYPES)} "
            "(Llama, SmolLM2, Qwen2); use strategy=fsdp for other models"
        )
        return errors
    if _value(hf_config, "hidden_act", "silu") != "silu":
        errors.append(f"hidden_act {hf_config.hidden_act!r} is not supported (SwiGLU with silu only)")
    if model_type == "llama" and (_value(hf_config, "attention_bias", False) or _value(hf_config, "mlp_bias", False)):
        errors.append("Llama with attention_bias/mlp_bias is not supported by the megatron engine")
    if model_type == "qwen2" and _value(hf_config, "use_sliding_window", False):
        errors.append("Qwen2 with use_sliding_window=true is not supported by the megatron engine")
    heads, groups = (
        hf_config.num_attention_heads,
        _value(hf_config, "num_key_value_heads") or hf_config.num_attention_heads,
    )
    tp, pp, vpp = sizes.tensor, sizes.pipeline, sizes.virtual_pipeline or 1
    if heads % tp or groups % tp:
        errors.append(
            f"tensor_model_parallel_size={tp} must divide the attention heads ({heads}) and the key/value heads "
            f"({groups}) of {hf_config.model_type}; choose a divisor of both"
        )
    if hf_config.vocab_size % tp:
        errors.append(f"tensor_model_parallel_size={tp} must divide the vocabulary size {hf_config.vocab_size}")
    layers = hf_config.num_hidden_layers
    if layers % (pp * vpp):
        errors.append(
            f"pipeline_model_parallel_size * virtual_pipeline_model_parallel_size = {pp}*{vpp} must divide the "
            f"{layers} decoder layers"
        )
    if vpp > 1 and pp == 1:
        errors.append("virtual_pipeline_model_parallel_size needs pipeline_model_parallel_size > 1")
    return errors


def head_dim(hf_config: Any) -> int:
    """Per-head dimension (``head_dim`` when the config sets it, else ``hidden_size / heads``)."""
    return _value(hf_config, "head_dim") or hf_config.hidden_size // hf_config.num_attention_heads


def hf_to_mcore_config_kwargs(
    hf_config: Any,
    sizes: ParallelSizes,
    params_dtype: Any,
    use_cpu_initialization: bool,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``megatron.core.transformer.TransformerConfig`` for ``hf_config`` split by ``sizes``.

    Parameters are created uninitialised (``perform_initialization=False``): the builder loads every weight.
    ``init_model_with_meta_device=True`` skips megatron-core's start-up all-reduce of the tied embedding copy on
    the last pipeline stage (it moves the tensor with a hard-coded ``.cuda()``); the loader fills both copies.
    ``overrides`` (``megatron.override_transformer_config``) are applied last.
    """
    import torch.nn.functional as F

    errors = check_supported(hf_config, sizes)
    if errors:
        raise ValueError("; ".join(errors))
    kwargs: dict[str, Any] = dict(
        num_layers=hf_config.num_hidden_layers,
        hidden_size=hf_config.hidden_size,
        ffn_hidden_size=hf_config.intermediate_size,
        num_attention_heads=hf_config.num_attention_heads,
        num_query_groups=_value(hf_config, "num_key_value_heads") or hf_config.num_attention_heads,
        kv_channels=head_dim(hf_config),
        normalization="RMSNorm",
        layernorm_epsilon=float(hf_config.rms_norm_eps),
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=MODEL_TYPES[hf_config.model_type]["qkv_bias"],
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
        tensor_model_parallel_size=sizes.tensor,
        pipeline_model_parallel_size=sizes.pipeline,
        virtual_pipeline_model_parallel_size=sizes.virtual_pipeline,
        sequence_parallel=bool(sizes.sequence_parallel and sizes.tensor > 1),
        params_dtype=params_dtype,
        pipeline_dtype=params_dtype,
        use_cpu_initialization=use_cpu_initialization,
        perform_initialization=False,
        init_model_with_meta_device=True,
        # packed sequences change length per micro-batch; megatron-core insists on the all-to-all dispatcher then
        variable_seq_lengths=True,
        moe_token_dispatcher_type="alltoall",
        calculate_per_token_loss=True,
    )
    kwargs.update(overrides or {})
    return kwargs

"""Build the pipeline chunks of a Hugging Face model as megatron-core ``GPTModel`` s (local layer spec).

Layer spec: megatron-core's ``TransformerLayer`` with ``ColumnParallelLinear`` / ``RowParallelLinear``
projections, :class:`RMSNorm` (Hugging Face's formula; marks its weight ``sequence_parallel`` so the engine
all-reduces its gradient over the tensor-parallel group when sequence parallelism is on) and
:class:`~verl.models.mcore.attention.PackedRotaryAttention`. A value model (critic) replaces the vocabulary head
of the last chunk with :class:`ValueHead`. ``GPTModel`` logs a deprecation notice in favour of ``HybridModel``;
megatron-core 0.19's ``HybridModel`` ships only a Transformer Engine spec, so the local spec needs ``GPTModel``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from verl.models.mcore.attention import HFRotary, PackedRotaryAttention


class RMSNorm(nn.Module):
    """``weight * (x / sqrt(mean(x^2) + eps))`` computed in float32 and cast back, as Hugging Face's LlamaRMSNorm;
    under autocast the result is in the autocast dtype."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-6, **_unused: Any):
        super().__init__()
        self.eps = eps
        device = "cpu" if config.use_cpu_initialization else torch.cuda.current_device()
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype, device=device))
        self.weight.sequence_parallel = bool(config.sequence_parallel)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        dtype = hidden_states.dtype
        hidden = hidden_states.float()
        hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * hidden.to(dtype)
        device = hidden_states.device.type
        if torch.is_autocast_enabled(device):
            # A norm feeds a projection, which autocast runs in its dtype anyway (same numbers). Casting here keeps
            # sequence parallelism working: megatron-core's ColumnParallelLinear all-gathers its input and
            # reduce-scatters the input gradient into a buffer of the input's dtype, and NCCL/gloo refuse a float32
            # buffer for the autocast-dtype gradient ("input tensor must be the same type as the output tensor").
            out = out.to(torch.get_autocast_dtype(device))
        return out


class ValueHead(nn.Module):
    """Scalar value per token, ``v = h w^T + b`` with ``w (1, hidden)`` replicated on every tensor-parallel rank
    (Hugging Face's ``score`` of ``*ForTokenClassification``). Called like megatron-core's output layer."""

    def __init__(self, config, hidden_size: int):
        super().__init__()
        device = "cpu" if config.use_cpu_initialization else torch.cuda.current_device()
        self.weight = nn.Parameter(torch.empty(1, hidden_size, dtype=config.params_dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(1, dtype=config.params_dtype, device=device))
        self.sequence_parallel = bool(config.sequence_parallel)

    def forward(self, hidden_states: torch.Tensor, weight=None, runtime_gather_output=None, **_unused: Any):
        if self.sequence_parallel:
            from megatron.core.tensor_parallel import gather_from_sequence_parallel_region

            # every rank computes all values; the backward keeps this rank's slice (no sum over ranks)
            hidden_states = gather_from_sequence_parallel_region(hidden_states, tensor_parallel_output_grad=False)
        return F.linear(hidden_states, self.weight, self.bias), None


def layer_spec(rotary: HFRotary):
    """``ModuleSpec`` of one decoder layer (see the module docstring)."""
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_layer import TransformerLayer, TransformerLayerSubmodules

    attention = ModuleSpec(
        module=SelfAttention,
        params={"attn_mask_type": AttnMaskType.causal},
        submodules=SelfAttentionSubmodules(
            linear_qkv=ColumnParallelLinear,
            core_attention=ModuleSpec(module=PackedRotaryAttention, params={"rotary": rotary}),
            linear_proj=RowParallelLinear,
            q_layernorm=IdentityOp,
            k_layernorm=IdentityOp,
        ),
    )
    mlp = functools.partial(
        MLP.as_mlp_submodule, submodules=MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear)
    )
    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(
            input_layernorm=RMSNorm,
            self_attention=attention,
            self_attn_bda=get_bias_dropout_add,
            pre_mlp_layernorm=RMSNorm,
            mlp=mlp,
            mlp_bda=get_bias_dropout_add,
        ),
    )


def build_chunks(hf_config: Any, transformer_config, value_model: bool) -> list[nn.Module]:
    """This pipeline rank's model chunks (one per virtual stage), parameters allocated but not loaded.

    Needs ``megatron.core.parallel_state`` initialised with the sizes of ``transformer_config``.
    """
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules, get_num_layers_to_build

    from verl.models.mcore.weight_converter import is_tied

    rotary = HFRotary(hf_config)
    spec = layer_spec(rotary)
    virtual = transformer_config.virtual_pipeline_model_parallel_size
    chunks = []
    for chunk in range(virtual or 1):
        vp_stage = chunk if virtual else None
        first = parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage)
        last = parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage)
        block = TransformerBlockSubmodules(
            layer_specs=[spec] * get_num_layers_to_build(transformer_config, vp_stage=vp_stage), layer_norm=RMSNorm
        )
        model = GPTModel(
            transformer_config,
            block,
            vocab_size=hf_config.vocab_size,
            max_sequence_length=hf_config.max_position_embeddings,
            pre_process=first,
            post_process=last,
            share_embeddings_and_output_weights=is_tied(hf_config),
            position_embedding_type="none",
            vp_stage=vp_stage,
        )
        if last and value_model:
            model.output_layer = ValueHead(transformer_config, hf_config.hidden_size)
        chunks.append(model)
    return chunks


def global_param_name(chunk: nn.Module, local_name: str) -> str:
    """``decoder.layers.{local}.x`` of ``chunk`` -> ``decoder.layers.{global}.x`` (other names unchanged)."""
    prefix = "decoder.layers."
    if not local_name.startswith(prefix):
        return local_name
    index, _, rest = local_name[len(prefix) :].partition(".")
    layer = chunk.decoder.layers[int(index)]
    return f"{prefix}{layer.layer_number - 1}.{rest}"


def named_global_parameters(chunks: list[nn.Module]) -> list[tuple[int, str, nn.Parameter]]:
    """``(chunk index, global megatron-core name, parameter)`` of every parameter this rank holds."""
    return [
        (index, global_param_name(chunk, name), param)
        for index, chunk in enumerate(chunks)
        for name, param in chunk.named_parameters()
    ]

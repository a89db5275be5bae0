"""Core attention for megatron-core's local layer spec on packed sequences, with Hugging Face rotary embeddings.

Takes the place of megatron-core's ``DotProductAttention`` (which needs a CUDA RNG tracker and a CUDA causal mask
and has no packed-sequence support) in ``SelfAttention``. Inputs are packed (``thd``): ``query (T, heads, d)``,
``key``/``value (T, kv_heads, d)`` of the local tensor-parallel heads, with ``cu_seqlens (n + 1,)`` marking the
sequences. For every sequence it

1. rotates q and k with the Hugging Face model's own rotary class at positions ``0 .. len - 1``
   (``q' = q cos + rotate_half(q) sin``, Su et al. 2021, RoFormer eq. 34), so any RoPE variant of transformers
   (llama3, yarn, linear, ...) matches the HF model exactly;
2. runs causal softmax attention ``softmax(q k^T / sqrt(d)) v`` with grouped key/value heads through the FSDP
   engine's :func:`~verl.workers.engine.fsdp.attention.packed_causal_attention` with its Megatron default kernel
   (``MEGATRON_CUDA_KERNEL``, the pack right-padded for sdpa's flash backend) for bf16/fp16 CUDA tensors (one call
   for the whole pack, no host sync), else ``scaled_dot_product_attention`` per sequence. (A Python loop over the
   sequences on the GPU costs a few kernel launches per sequence and layer, forward and backward: seconds per step
   for a few hundred packed rollouts.)
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from megatron.core.transformer.module import MegatronModule

from verl.workers.engine.fsdp.attention import MEGATRON_CUDA_KERNEL, packed_causal_attention

_ROPE_CACHE_ATTR = "_verl_rope_cos_sin"


class HFRotary:
    """Cos/sin tables of a Hugging Face rotary-embedding module for packed positions (shared by all layers;
    deliberately not an ``nn.Module`` so it is neither a parameter nor a buffer of any layer)."""

    def __init__(self, hf_config: Any):
        self.module = rotary_module(hf_config)

    def cos_sin(self, packed_seq_params: Any, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` of shape ``(T, 1, d)`` in ``like``'s dtype, computed once per packed micro-batch."""
        cached = getattr(packed_seq_params, _ROPE_CACHE_ATTR, None)
        if cached is not None and cached[0].dtype == like.dtype and cached[0].device == like.device:
            return cached
        positions = packed_positions(packed_seq_params.cu_seqlens_q.to(like.device))
        cos, sin = self.module(like, positions[None])  # (1, T, d)
        cached = (cos[0, :, None, :], sin[0, :, None, :])
        setattr(packed_seq_params, _ROPE_CACHE_ATTR, cached)
        return cached


def rotary_module(hf_config: Any) -> torch.nn.Module:
    """The ``*RotaryEmbedding`` module of ``hf_config``'s model family (e.g. ``LlamaRotaryEmbedding``)."""
    import transformers

    family = transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES.get(hf_config.model_type)
    if family is None:
        raise ValueError(f"no Hugging Face model class for model_type {hf_config.model_type!r}")
    module = importlib.import_module(getattr(transformers, family).__module__)
    rotary_cls = getattr(module, family.replace("Model", "RotaryEmbedding"))
    return rotary_cls(config=hf_config)


def packed_positions(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """``(T,)`` position of every packed token within its own sequence (0-based)."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    starts = torch.repeat_interleave(cu_seqlens[:-1].long(), lengths)
    return torch.arange(int(cu_seqlens[-1]), device=cu_seqlens.device) - starts


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[-x2, x1]`` for ``x = [x1, x2]`` split in halves along the last dim (GPT-NeoX / Llama layout)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class PackedRotaryAttention(MegatronModule):
    """Drop-in ``core_attention`` of ``SelfAttention`` (same constructor and ``forward`` signature as
    megatron-core's ``DotProductAttention``) for ``thd`` packed sequences; ``rotary`` is passed through the
    module spec's ``params``."""

    def __init__(
        self,
        config,
        layer_number: int,
        attn_mask_type=None,
        attention_type: str = "self",
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection=None,
        rotary: HFRotary | None = None,
    ):
        super().__init__(config=config)
        if rotary is None:
            raise ValueError("PackedRotaryAttention needs the model's HFRotary (module spec params)")
        if config.context_parallel_size != 1:
            raise ValueError("context parallelism needs Transformer Engine attention; set context_parallel_size=1")
        self.rotary = rotary
        self.layer_number = layer_number
        self.softmax_scale = softmax_scale if softmax_scale is not None else config.kv_channels**-0.5

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask=None,
        attn_mask_type=None,
        attention_bias=None,
        packed_seq_params=None,
    ) -> torch.Tensor:
        """``(T, heads * d)`` attention output of packed ``query (T, heads, d)``, ``key``/``value (T, kv_heads, d)``."""
        if packed_seq_params is None or packed_seq_params.qkv_format != "thd":
            raise ValueError("PackedRotaryAttention runs on packed (thd) sequences: pass PackedSeqParams")
        cos, sin = self.rotary.cos_sin(packed_seq_params, query)
        query = query * cos + rotate_half(query) * sin
        key = key * cos + rotate_half(key) * sin
        max_len = int(packed_seq_params.max_seqlen_q)
        out = packed_causal_attention(
            query, key, value, packed_seq_params.cu_seqlens_q, max_len, self.softmax_scale, MEGATRON_CUDA_KERNEL
        )
        return out.reshape(out.shape[0], -1)

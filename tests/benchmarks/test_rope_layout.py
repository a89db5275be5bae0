"""Token-major RoPE (the update benchmark's ``+ropetokens``) against transformers' own ``apply_rotary_pos_emb``."""

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaConfig, LlamaRotaryEmbedding, apply_rotary_pos_emb

from benchmarks.gpu.rope_layout import apply_rotary_token_major


def test_same_values_as_transformers_and_token_major_memory():
    tokens, heads, kv_heads, dim = 37, 6, 2, 16
    config = LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads, num_key_value_heads=kv_heads)
    position_ids = torch.cat([torch.arange(20), torch.arange(17)])[None]  # two packed sequences
    q_proj, k_proj = torch.randn(1, tokens, heads * dim), torch.randn(1, tokens, kv_heads * dim)
    cos, sin = LlamaRotaryEmbedding(config)(q_proj, position_ids)
    q = q_proj.view(1, tokens, heads, dim).transpose(1, 2)  # as the attention module makes them
    k = k_proj.view(1, tokens, kv_heads, dim).transpose(1, 2)
    expected = apply_rotary_pos_emb(q, k, cos, sin)
    got = apply_rotary_token_major(q, k, cos, sin)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=0, atol=0)
        assert g[0].transpose(0, 1).is_contiguous()  # the packed attention's (T, h, d) view needs no copy
    with pytest.raises(ValueError, match="unsqueeze_dim"):
        apply_rotary_token_major(q, k, cos, sin, unsqueeze_dim=2)

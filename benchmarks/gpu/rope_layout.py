"""RoPE computed in the projections' own token-major layout, for the update benchmark's ``+ropetokens`` variant.

transformers' Llama/Qwen2 attention turns each projection ``(b, T, h * d)`` into ``(b, h, T, d)`` with a transpose
view and applies RoPE there, so inductor's fused RoPE kernel iterates heads-major and writes a heads-major tensor,
which the packed attention then copies back to token-major ``(T, h, d)`` for the varlen kernel. Session 19's profile
had those compiled RoPE kernels at about a fifth of their memory-traffic floor (27.5 ms of a 0.500 s 0.5B step).

:func:`apply_rotary_token_major` takes and returns the same ``(b, h, T, d)`` views but computes on the token-major
``(b, T, h, d)`` tensors behind them, so the result is token-major memory seen through a transpose: the packed
attention's ``(T, h, d)`` view of it is contiguous. Same arithmetic, element for element, as
``transformers.models.llama.modeling_llama.apply_rotary_pos_emb``.
"""

from __future__ import annotations

from transformers.models.llama.modeling_llama import rotate_half

MODULES = ("transformers.models.llama.modeling_llama", "transformers.models.qwen2.modeling_qwen2")


def apply_rotary_token_major(q, k, cos, sin, unsqueeze_dim: int = 1):
    """``(q_embed, k_embed)`` as ``(b, h, T, d)`` views of token-major results; ``cos``/``sin`` are ``(b, T, d)``."""
    if unsqueeze_dim != 1:
        raise ValueError(
            f"token-major RoPE expects heads-major (b, h, T, d) inputs (unsqueeze_dim=1), not {unsqueeze_dim}"
        )
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # (b, T, 1, d)
    q_tokens, k_tokens = q.transpose(1, 2), k.transpose(1, 2)  # (b, T, h, d)
    q_embed = q_tokens * cos + rotate_half(q_tokens) * sin
    k_embed = k_tokens * cos + rotate_half(k_tokens) * sin
    return q_embed.transpose(1, 2), k_embed.transpose(1, 2)


def use_token_major_rope() -> None:
    """Point Llama's and Qwen2's attention at :func:`apply_rotary_token_major` (before the model compiles)."""
    import importlib

    for name in MODULES:
        importlib.import_module(name).apply_rotary_pos_emb = apply_rotary_token_major

"""Unpad / repad helpers for packed (remove-padding) sequences, with flash-attn's signatures.

A padded batch ``(batch, seqlen, ...)`` with an ``attention_mask (batch, seqlen)`` packs into
``(total_tokens, ...)`` holding only the unmasked tokens, row after row; ``cu_seqlens (batch + 1,)`` are the
int32 offsets of each row in the packed tensor, as variable-length attention kernels expect.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["index_first_axis", "pad_input", "unpad_input"]


def index_first_axis(values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``values[indices]`` along the first axis: ``(N, ...)``, ``(K,)`` -> ``(K, ...)`` (differentiable)."""
    return values.index_select(0, indices)


def unpad_input(
    hidden_states: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Pack the unmasked tokens of ``hidden_states (batch, seqlen, ...)``.

    Returns ``(packed (total, ...), indices (total,) into batch*seqlen, cu_seqlens (batch + 1,) int32,
    max_seqlen_in_batch)``.
    """
    if hidden_states.shape[:2] != attention_mask.shape:
        raise ValueError(
            f"hidden_states shape {tuple(hidden_states.shape)} does not start with attention_mask shape "
            f"{tuple(attention_mask.shape)}"
        )
    seqlens_in_batch = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    max_seqlen_in_batch = int(seqlens_in_batch.max().item()) if seqlens_in_batch.numel() else 0
    cu_seqlens = F.pad(torch.cumsum(seqlens_in_batch, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, cu_seqlens, max_seqlen_in_batch


def pad_input(hidden_states: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    """Inverse of :func:`unpad_input`: scatter ``(total, ...)`` back to ``(batch, seqlen, ...)`` with zeros."""
    output = hidden_states.new_zeros(batch * seqlen, *hidden_states.shape[1:])
    output = output.index_copy(0, indices, hidden_states)
    return output.reshape(batch, seqlen, *hidden_states.shape[1:])

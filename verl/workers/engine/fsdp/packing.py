"""Remove-padding: pack the valid tokens of a padded micro-batch into one sequence and scatter results back.

``input_ids (bs, S)`` with ``attention_mask (bs, S)`` becomes ``(1, T)`` with ``T = attention_mask.sum()``
and ``position_ids (1, T)`` restarting at 0 for every sequence. The sequence boundaries go to the model as
transformers' flash-attention kwargs (:meth:`PackedBatch.attention_kwargs`): the ``verl_varlen`` and
flash-attention implementations run varlen kernels on them; sdpa/eager ignore them and build a block-diagonal
causal mask from the position ids (``transformers.masking_utils.find_packed_sequence_indices``).

Those kwargs describe the TEXT pack only. A vision-language model forwards its ``**kwargs`` into the vision
tower as well (transformers 5.17's Qwen2-VL does; 5.19 drops them), whose attention would then run over the
image patches with the text boundaries: causal, wrongly split, and on CUDA reading past the patch tensor
(issue 21: an illegal memory access in the reference pass). :func:`keep_text_boundaries_out_of_encoders` strips
them at the encoder's entry, whatever the transformers version.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

PACKING_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
"""The keyword arguments :meth:`PackedBatch.attention_kwargs` adds to a model call."""


@dataclass
class PackedBatch:
    """A packed micro-batch. ``indices (T,)`` are flat positions into ``(bs * S)`` of the valid tokens."""

    input_ids: torch.Tensor  # (1, T)
    position_ids: torch.Tensor  # (1, T), or (C, 1, T) for multi-row (M-RoPE) ids
    indices: torch.Tensor  # (T,)
    cu_seqlens: torch.Tensor  # (bs + 1,) int32
    batch_size: int
    seqlen: int
    max_seqlen: int

    def attention_kwargs(self) -> dict:
        """Sequence boundaries as transformers' flash-attention kwargs (forwarded to every attention call)."""
        cu_seqlens = self.cu_seqlens.to(self.input_ids.device)
        return {
            "cu_seq_lens_q": cu_seqlens,
            "cu_seq_lens_k": cu_seqlens,
            "max_length_q": self.max_seqlen,
            "max_length_k": self.max_seqlen,
        }

    def next_token_labels(self) -> torch.Tensor:
        """``(T,)`` label of each packed position: the following packed token (garbage at sequence ends, which
        land on padding or past the response once scattered back)."""
        return torch.roll(self.input_ids[0], shifts=-1)

    def unpack(self, values: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """Scatter ``values (T, ...)`` back to ``(bs, S, ...)``; padding positions get ``fill``."""
        out = values.new_full((self.batch_size * self.seqlen, *values.shape[1:]), fill)
        out[self.indices] = values
        return out.view(self.batch_size, self.seqlen, *values.shape[1:])


def _drop_packing_kwargs(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    return args, {k: v for k, v in kwargs.items() if k not in PACKING_KWARGS}


def keep_text_boundaries_out_of_encoders(encoder: nn.Module) -> None:
    """Register a forward pre-hook on a multimodal ``encoder`` (a VLM's vision tower) that drops
    :data:`PACKING_KWARGS`; the encoder then splits its patches by its own ``cu_seqlens`` (from ``grid_thw``)."""
    encoder.register_forward_pre_hook(_drop_packing_kwargs, with_kwargs=True)


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor) -> PackedBatch:
    """Pack ``(bs, S)`` tensors into ``(1, T)``. ``position_ids`` must be 0-based within each sequence
    (``compute_position_id_with_mask``); a sequence's first valid token must have position 0. M-RoPE ids
    ``(bs, C, S)`` pack to ``(C, 1, T)``."""
    if position_ids.dim() not in (2, 3):
        raise ValueError(f"remove-padding takes position_ids (bs, S) or (bs, C, S); got {tuple(position_ids.shape)}")
    batch_size, seqlen = input_ids.shape
    flat_mask = attention_mask.reshape(-1).bool()
    indices = torch.nonzero(flat_mask, as_tuple=False).flatten()
    lengths = attention_mask.sum(dim=-1, dtype=torch.int32)
    cu_seqlens = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    packed_ids = input_ids.reshape(-1)[indices].unsqueeze(0)
    if position_ids.dim() == 3:  # (bs, C, S) -> (C, bs * S) -> (C, 1, T)
        packed_pos = position_ids.transpose(0, 1).reshape(position_ids.shape[1], -1)[:, indices].unsqueeze(1)
    else:
        packed_pos = position_ids.reshape(-1)[indices].unsqueeze(0)
    max_seqlen = int(lengths.max()) if batch_size else 0
    return PackedBatch(packed_ids, packed_pos, indices, cu_seqlens, batch_size, seqlen, max_seqlen)

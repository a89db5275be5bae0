"""One micro-batch in megatron-core's packed (``thd``) form: the valid tokens of ``(bs, S)`` as one ``(1, T)`` row.

Sequence boundaries travel in ``PackedSeqParams.cu_seqlens_q``. With sequence parallelism the packed length is
padded to a multiple of the tensor-parallel size with one extra padding "sequence" (it attends only to itself and
its outputs are dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from verl.workers.engine.fsdp.packing import PackedBatch, pack


@dataclass
class PackedMicroBatch:
    """``input_ids (1, T + pad)``, ``labels (T + pad,)`` and the ``PackedSeqParams`` of a packed micro-batch."""

    packed: PackedBatch
    input_ids: torch.Tensor
    labels: torch.Tensor
    packed_seq_params: Any
    num_tokens: int

    @property
    def padded_length(self) -> int:
        return self.input_ids.shape[1]

    def unpack(self, values: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """``values (T + pad, ...)`` back to ``(bs, S, ...)`` (padding rows dropped, padded positions ``fill``)."""
        return self.packed.unpack(values[: self.num_tokens], fill=fill)


def pack_micro_batch(micro_batch, pad_multiple: int, device: torch.device) -> PackedMicroBatch:
    """Pack a TensorDict micro-batch with ``input_ids``, ``attention_mask`` and ``position_ids`` ``(bs, S)``."""
    from megatron.core.packed_seq_params import PackedSeqParams

    packed = pack(micro_batch["input_ids"], micro_batch["attention_mask"], micro_batch["position_ids"])
    num_tokens = packed.input_ids.shape[1]
    input_ids = packed.input_ids
    labels = packed.next_token_labels()
    cu_seqlens = packed.cu_seqlens
    pad = (-num_tokens) % pad_multiple
    if pad:
        input_ids = torch.nn.functional.pad(input_ids, (0, pad))
        labels = torch.nn.functional.pad(labels, (0, pad))
        cu_seqlens = torch.cat([cu_seqlens, cu_seqlens.new_tensor([num_tokens + pad])])
    max_len = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    cu_seqlens = cu_seqlens.to(device)
    params = PackedSeqParams(
        qkv_format="thd", cu_seqlens_q=cu_seqlens, cu_seqlens_kv=cu_seqlens, max_seqlen_q=max_len, max_seqlen_kv=max_len
    )
    return PackedMicroBatch(packed, input_ids.to(device), labels.to(device), params, num_tokens)

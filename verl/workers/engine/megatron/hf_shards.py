"""This rank's tensor-parallel shards expressed as shards of Hugging Face tensors (the checkpoint layout).

A megatron-core shard splits into Hugging Face pieces that are each a contiguous slice of one full HF tensor
along one dimension: rank ``r``'s fused ``linear_qkv`` rows hold its key/value groups, i.e. rows block ``r`` of
``q_proj``, ``k_proj`` and ``v_proj``; its ``linear_fc1`` rows are ``[gate_r; up_r]``; row-parallel weights split
the input dimension. Checkpoints store these pieces (``torch.distributed.checkpoint`` with ``DTensor`` shards over
the tensor-parallel group), so a checkpoint is a sharded Hugging Face state dict: readable with any tensor or
pipeline layout, and mergeable into a Hugging Face folder without knowing the layout it was written with.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from verl.models.mcore.config_converter import head_dim
from verl.models.mcore.tp_split import partition
from verl.models.mcore.weight_converter import fuse, hf_names, unfuse

_SPLIT_DIM = {"column": 0, "fc1": 0, "row": 1, "replicated": None}


@dataclass
class HFShard:
    """``local`` slice of the Hugging Face tensor of ``full_shape``, split along ``dim`` (None: replicated)."""

    local: torch.Tensor
    dim: int | None
    full_shape: torch.Size


def _local_config(hf_config: Any, tp_size: int) -> SimpleNamespace:
    """The attention geometry of one tensor-parallel rank (its query heads and key/value groups)."""
    heads = hf_config.num_attention_heads
    groups = getattr(hf_config, "num_key_value_heads", None) or heads
    return SimpleNamespace(
        model_type=hf_config.model_type,
        num_attention_heads=heads // tp_size,
        num_key_value_heads=groups // tp_size,
        head_dim=head_dim(hf_config),
        architectures=getattr(hf_config, "architectures", None),
        tie_word_embeddings=getattr(hf_config, "tie_word_embeddings", False),
    )


def to_hf_shards(name: str, shard: torch.Tensor, hf_config: Any, tp_size: int, value_model: bool):
    """``[(hf_name, HFShard)]`` of this rank's shard of the megatron-core tensor ``name``."""
    dim = _SPLIT_DIM[partition(name, value_model)] if tp_size > 1 else None
    pieces = unfuse(name, shard, _local_config(hf_config, tp_size))
    out = []
    for hf_name, piece in zip(hf_names(name, hf_config), pieces, strict=True):
        full = list(piece.shape)
        if dim is not None:
            full[dim] *= tp_size
        out.append((hf_name, HFShard(piece, dim, torch.Size(full))))
    return out


def from_hf_shards(name: str, pieces: list[torch.Tensor], hf_config: Any, tp_size: int) -> torch.Tensor:
    """This rank's shard of ``name`` from its Hugging Face pieces (inverse of :func:`to_hf_shards`)."""
    return fuse(name, pieces, _local_config(hf_config, tp_size))

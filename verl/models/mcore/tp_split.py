"""Tensor-parallel split and merge of full megatron-core tensors (the local layer spec's partitioning).

* column parallel (split the output rows, dim 0): ``linear_qkv`` (whole key/value groups per rank, since the fused
  rows are group-major), the vocabulary of ``embedding.word_embeddings`` and of the LM ``output_layer``;
* ``linear_fc1`` is column parallel per half: rank ``r`` holds ``[gate_r; up_r]``;
* row parallel (split the input columns, dim 1): ``linear_proj`` and ``linear_fc2``;
* replicated: the norms and a value model's one-output head.
"""

from __future__ import annotations

import torch

from verl.models.mcore.weight_converter import split_layer_name

_ROW_PARALLEL = ("self_attention.linear_proj.weight", "mlp.linear_fc2.weight")
_COLUMN_PARALLEL = ("self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias")
_VOCAB = ("embedding.word_embeddings.weight",)
_FC1 = "mlp.linear_fc1.weight"


def partition(name: str, value_model: bool = False) -> str:
    """How ``name`` is split: ``"column"``, ``"row"``, ``"fc1"`` or ``"replicated"``."""
    _, rest = split_layer_name(name)
    if rest in _ROW_PARALLEL:
        return "row"
    if rest in _COLUMN_PARALLEL or name in _VOCAB or (name == "output_layer.weight" and not value_model):
        return "column"
    if rest == _FC1:
        return "fc1"
    return "replicated"


def tp_shard(name: str, full: torch.Tensor, rank: int, size: int, value_model: bool = False) -> torch.Tensor:
    """Rank ``rank``'s shard (of ``size``) of the full megatron-core tensor ``name`` (a view when possible)."""
    kind = partition(name, value_model)
    if size == 1 or kind == "replicated":
        return full
    if kind == "row":
        return full.chunk(size, dim=1)[rank]
    if kind == "column":
        return full.chunk(size, dim=0)[rank]
    gate, up = full.chunk(2, dim=0)
    return torch.cat([gate.chunk(size, dim=0)[rank], up.chunk(size, dim=0)[rank]], dim=0)


def tp_merge(name: str, shards: list[torch.Tensor], value_model: bool = False) -> torch.Tensor:
    """The full tensor from every rank's shard (inverse of :func:`tp_shard`)."""
    kind = partition(name, value_model)
    if len(shards) == 1 or kind == "replicated":
        return shards[0]
    if kind == "row":
        return torch.cat(shards, dim=1)
    if kind == "column":
        return torch.cat(shards, dim=0)
    halves = [shard.chunk(2, dim=0) for shard in shards]
    return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)


def full_shape(name: str, local_shape: torch.Size, size: int, value_model: bool = False) -> torch.Size:
    """Shape of the full tensor whose rank shard has ``local_shape``."""
    kind = partition(name, value_model)
    shape = list(local_shape)
    if size > 1 and kind in ("column", "fc1"):
        shape[0] *= size
    elif size > 1 and kind == "row":
        shape[1] *= size
    return torch.Size(shape)

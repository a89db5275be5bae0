"""Fill this rank's megatron-core parameters from a Hugging Face checkpoint folder (safetensors).

Every rank reads only the Hugging Face tensors of the layers its pipeline chunks hold, fuses them
(:func:`~verl.models.mcore.weight_converter.fuse`) and keeps its tensor-parallel shard
(:func:`~verl.models.mcore.tp_split.tp_shard`). With tied embeddings the last pipeline stage's copy of the output
weight is filled from ``model.embed_tokens.weight`` too. A value model's head is read from ``score.*`` when the
folder has it (a trained critic), else initialised as Hugging Face does (``normal(0, initializer_range)``, zero
bias) from a generator seeded with ``seed``, identically on every rank.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from verl.models.mcore.model import named_global_parameters
from verl.models.mcore.tp_split import tp_shard
from verl.models.mcore.weight_converter import fuse, hf_names, is_tied, is_value_model

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class SafetensorsReader:
    """Read single tensors by name from a Hugging Face folder (one file or a sharded index)."""

    def __init__(self, folder: str):
        from safetensors import safe_open

        index = os.path.join(folder, INDEX_FILE)
        if os.path.exists(index):
            with open(index) as handle:
                weight_map = json.load(handle)["weight_map"]
        elif os.path.exists(os.path.join(folder, SINGLE_FILE)):
            weight_map = None
        else:
            raise FileNotFoundError(
                f"{folder} has no {SINGLE_FILE} or {INDEX_FILE}: the megatron engine loads safetensors checkpoints"
            )
        files = sorted(set(weight_map.values())) if weight_map else [SINGLE_FILE]
        self._handles = {f: safe_open(os.path.join(folder, f), framework="pt") for f in files}
        self._where = weight_map or {k: SINGLE_FILE for k in self._handles[SINGLE_FILE].keys()}

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def get(self, name: str) -> torch.Tensor:
        if name not in self._where:
            raise KeyError(f"tensor {name!r} is not in the checkpoint")
        return self._handles[self._where[name]].get_tensor(name)


def source_name(name: str, hf_config: Any) -> str:
    """The megatron-core tensor whose Hugging Face weights fill ``name`` (the embedding for a tied output copy)."""
    if name == "output_layer.weight" and is_tied(hf_config):
        return "embedding.word_embeddings.weight"
    return name


def init_value_head(name: str, shape: torch.Size, hf_config: Any, seed: int) -> torch.Tensor:
    """Hugging Face's initialisation of a fresh ``score`` layer, identical on every rank."""
    if name.endswith(".bias"):
        return torch.zeros(shape)
    generator = torch.Generator().manual_seed(seed)
    std = float(getattr(hf_config, "initializer_range", 0.02))
    return torch.normal(0.0, std, size=tuple(shape), generator=generator)


def load_hf_weights(
    chunks: list[nn.Module],
    hf_path: str,
    hf_config: Any,
    tp_rank: int,
    tp_size: int,
    seed: int = 42,
    value_head: dict[str, torch.Tensor] | None = None,
) -> None:
    """Copy the Hugging Face weights at ``hf_path`` into ``chunks`` (this rank's shards). ``value_head`` gives a
    value model's full ``output_layer.weight (1, hidden)`` / ``output_layer.bias (1,)`` when they are not the
    folder's ``score.*`` (a reward model's head, read and checked by the caller)."""
    reader = SafetensorsReader(hf_path)
    value_model = is_value_model(hf_config)

    def full_tensor(name: str, shape: torch.Size) -> torch.Tensor:
        source = source_name(name, hf_config)
        parts = hf_names(source, hf_config)
        if value_model and value_head is not None and name.startswith("output_layer."):
            return value_head[name]
        if value_model and name.startswith("output_layer.") and parts[0] not in reader:
            return init_value_head(name, shape, hf_config, seed)
        return fuse(source, [reader.get(part) for part in parts], hf_config)

    load_into(chunks, full_tensor, tp_rank, tp_size, value_model)


def load_into(
    chunks: list[nn.Module],
    full_tensor: Callable[[str, torch.Size], torch.Tensor],
    tp_rank: int,
    tp_size: int,
    value_model: bool,
) -> None:
    """Copy ``tp_shard(full_tensor(global_name, local_shape))`` into every parameter of ``chunks``."""
    with torch.no_grad():
        for _, name, param in named_global_parameters(chunks):
            full = full_tensor(name, param.shape)
            shard = tp_shard(name, full, tp_rank, tp_size, value_model)
            if shard.shape != param.shape:
                raise ValueError(f"{name}: checkpoint shard {tuple(shard.shape)} != parameter {tuple(param.shape)}")
            param.copy_(shard)

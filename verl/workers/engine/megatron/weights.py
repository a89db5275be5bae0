"""Full Hugging Face tensors from tensor/pipeline shards, for weight sync into a rollout engine and HF export.

A collective over the whole worker group: every rank walks the model's tensors in the same order
(:func:`~verl.models.mcore.weight_converter.mcore_param_names`). For each tensor the pipeline stage that holds it
all-gathers the tensor-parallel shards (:func:`~verl.models.mcore.tp_split.tp_merge`) and broadcasts the full
tensor over the pipeline group, so **every** rank ends with the full Hugging Face tensors. A rollout engine with
any tensor-parallel size can then take the tensors it needs (vLLM shards full tensors itself on load).
Tensors are gathered a bucket at a time (about ``bucket_bytes``), so the extra memory is about one bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from verl.models.mcore.model import named_global_parameters
from verl.models.mcore.tp_split import full_shape, partition, tp_merge
from verl.models.mcore.weight_converter import is_tied, is_value_model, mcore_param_names, to_hf
from verl.utils.weight_buckets import in_buckets
from verl.workers.engine.megatron.parallel import Ranks

EMBEDDING = "embedding.word_embeddings.weight"


@dataclass(frozen=True)
class TensorSpec:
    """Where a full megatron-core tensor lives: its pipeline rank (index in the pipeline group), shape, dtype."""

    owner: int
    shape: torch.Size
    dtype: torch.dtype


def local_parameters(chunks: list[torch.nn.Module]) -> dict[str, torch.nn.Parameter]:
    """``{global megatron-core name: parameter}`` of this rank, without the last stage's tied embedding copy."""
    return {name: param for _, name, param in named_global_parameters(chunks) if not getattr(param, "shared", False)}


def gather_specs(chunks: list[torch.nn.Module], ranks: Ranks, hf_config: Any) -> dict[str, TensorSpec]:
    """Every full tensor's :class:`TensorSpec`, in the model's canonical order (a pipeline-group collective)."""
    value_model = is_value_model(hf_config)
    mine = {
        name: (tuple(full_shape(name, p.shape, ranks.tp_size, value_model)), p.dtype)
        for name, p in local_parameters(chunks).items()
    }
    per_stage: list[Any] = [None] * ranks.pp_size
    if ranks.pp_size > 1:
        dist.all_gather_object(per_stage, mine, group=ranks.pp_group)
    else:
        per_stage = [mine]
    owners = {name: (stage, info) for stage, held in enumerate(per_stage) for name, info in held.items()}
    names = mcore_param_names(hf_config)
    missing = [n for n in names if n not in owners]
    if missing:
        raise RuntimeError(f"no pipeline stage holds {missing[:4]}: the model's layout does not match its config")
    return {n: TensorSpec(owners[n][0], torch.Size(owners[n][1][0]), owners[n][1][1]) for n in names}


def gather_full(
    name: str, spec: TensorSpec, params: dict[str, torch.nn.Parameter], ranks: Ranks, value_model: bool
) -> torch.Tensor:
    """The full megatron-core tensor ``name`` on every rank (collective over tensor and pipeline groups)."""
    if ranks.pp_rank == spec.owner:
        local = params[name].detach()
        if ranks.tp_size > 1 and partition(name, value_model) != "replicated":
            shards = [torch.empty_like(local) for _ in range(ranks.tp_size)]
            dist.all_gather(shards, local.contiguous(), group=ranks.tp_group)
            full = tp_merge(name, shards, value_model)
        else:
            full = local.clone()
    else:
        device = next(iter(params.values())).device
        full = torch.empty(spec.shape, dtype=spec.dtype, device=device)
    if ranks.pp_size > 1:
        dist.broadcast(full, src=ranks.pp_ranks[spec.owner], group=ranks.pp_group)
    return full


def iter_hf_weights(
    chunks: list[torch.nn.Module],
    ranks: Ranks,
    hf_config: Any,
    specs: dict[str, TensorSpec],
    bucket_bytes: int = 256 << 20,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(hf_name, full tensor)`` for the whole model (a tied model's head as ``lm_head.weight`` too, the
    embedding tensor itself); every rank must consume the iterator to its end."""
    params = local_parameters(chunks)
    value_model = is_value_model(hf_config)
    tied = is_tied(hf_config)

    def pairs() -> Iterator[tuple[str, torch.Tensor]]:
        for name, spec in specs.items():
            full = gather_full(name, spec, params, ranks, value_model)
            yield from to_hf(name, full, hf_config)
            if tied and name == EMBEDDING:
                # rollout engines load the tied head by its own name too (as an HF state_dict lists it)
                yield "lm_head.weight", full

    yield from in_buckets(pairs(), bucket_bytes, dtype, device)

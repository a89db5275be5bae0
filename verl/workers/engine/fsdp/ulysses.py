"""Ulysses sequence parallelism in the FSDP2 engine: the ``(dp, sp)`` device mesh and the packed forward pass.

The ``world`` ranks form ``dp = world / sp`` groups of ``sp`` consecutive ranks. The ranks of a group hold the same
micro-batches (dispatch gives them the same data: their ``dp`` coordinate is their data-parallel rank) and each
runs the model on its ``1 / sp`` slice of the packed tokens; attention exchanges heads for sequence inside the
group (``ulysses_attention``). FSDP still shards parameters over all ``world`` ranks.

Loss normalisation: token and sequence counts are summed over the ``dp`` group only (the ``sp`` peers hold copies of
the same rows). Every peer computes the same loss from the gathered per-token outputs and back-propagates its own
slice, so the peers' gradients sum to the gradient of that loss; FSDP averages over all ``world`` ranks, which the
engine undoes by scaling the loss by ``world`` (``FSDPEngine.backward``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import ProcessGroup

from verl.utils.device import get_device_name
from verl.utils.ulysses import gather_sequence, local_slice, pad_to_multiple
from verl.workers.engine.fsdp.packing import PackedBatch
from verl.workers.engine.fsdp.ulysses_attention import UlyssesAttentionInputs, sequence_parallel_forward

PerTokenHeads = Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]]
"""``heads(outputs (t, ...), next_token_labels (t,)) -> [per-token tensor (t,), ...]`` on one slice of a pack."""


@dataclass
class UlyssesMesh:
    """This rank's place in the ``(dp, sp)`` mesh. With ``sp_size == 1`` there are no groups: the data-parallel
    group is the whole world (``dp_group=None``) and nothing is split."""

    sp_size: int
    dp_size: int
    dp_rank: int
    sp_rank: int
    sp_group: ProcessGroup | None
    dp_group: ProcessGroup | None
    device_mesh: object | None = None

    @property
    def enabled(self) -> bool:
        return self.sp_size > 1

    @property
    def is_collect(self) -> bool:
        """One rank per data-parallel group returns outputs to the driver."""
        return self.sp_rank == 0


def create_ulysses_mesh(sp_size: int, key: str = "ulysses_sequence_parallel_size") -> UlyssesMesh:
    """The ``("dp", "sp")`` mesh of the initialised world (collective: every rank calls it)."""
    world = dist.get_world_size()
    rank = dist.get_rank()
    if sp_size < 1 or world % sp_size:
        raise ValueError(f"{key}={sp_size} must be a positive divisor of the world size {world}")
    if sp_size == 1:
        return UlyssesMesh(1, world, rank, 0, None, None)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(get_device_name(), (world // sp_size, sp_size), mesh_dim_names=("dp", "sp"))
    return UlyssesMesh(
        sp_size=sp_size,
        dp_size=world // sp_size,
        dp_rank=mesh["dp"].get_local_rank(),
        sp_rank=mesh["sp"].get_local_rank(),
        sp_group=mesh["sp"].get_group(),
        dp_group=mesh["dp"].get_group(),
        device_mesh=mesh,
    )


def forward_packed(
    module: nn.Module, packed: PackedBatch, mesh: UlyssesMesh, heads: PerTokenHeads
) -> list[torch.Tensor]:
    """Run ``module`` on this rank's slice of the packed batch and gather ``heads``' per-token outputs: a list
    of ``(T,)`` tensors over the whole pack, equal to running the unsplit pack.

    The pack is padded to a multiple of ``sp`` with token 0 at fresh positions ``0, 1, ...`` (a sequence of its own,
    after every real token, so causal attention never lets a real token see it). Labels are the next tokens of
    the whole pack, taken before slicing: a slice's last label lives on the next rank.
    """
    group, sp = mesh.sp_group, mesh.sp_size
    total = packed.input_ids.shape[1]
    labels = pad_to_multiple(packed.next_token_labels()[None], sp, dim=1)
    input_ids = pad_to_multiple(packed.input_ids, sp, dim=1)
    pad = input_ids.shape[1] - total
    padding_positions = torch.arange(pad, device=packed.position_ids.device, dtype=packed.position_ids.dtype)
    position_ids = torch.cat([packed.position_ids, padding_positions[None]], dim=1)
    single_sequence = int((packed.cu_seqlens[1:] > packed.cu_seqlens[:-1]).sum()) <= 1
    attention_inputs = UlyssesAttentionInputs(group, position_ids, single_sequence)
    with sequence_parallel_forward():
        output = module(
            input_ids=local_slice(input_ids, 1, group),
            position_ids=local_slice(position_ids, 1, group),
            use_cache=False,
            ulysses=attention_inputs,
        ).logits
    local = heads(output[0], local_slice(labels, 1, group)[0])
    return [gather_sequence(values, 0, group)[:total] for values in local]

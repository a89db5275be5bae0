"""megatron-core process groups for the engine: sizes from ``McoreEngineConfig``, ranks and groups of this process.

megatron-core keeps one set of groups per process (``megatron.core.parallel_state``), so every Megatron role in a
worker process (actor, reference, critic) must ask for the same sizes; :func:`initialize_parallel_state` checks it.
Rank order is megatron-core's ``tp-cp-ep-dp-pp``: tensor-parallel peers are adjacent ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class ParallelLayout:
    """Parallel sizes of one engine; ``data = world / (tensor * pipeline)``."""

    tensor: int
    pipeline: int
    virtual_pipeline: int | None
    data: int
    sequence_parallel: bool

    @classmethod
    def from_config(cls, engine_config, world: int) -> ParallelLayout:
        tp = int(engine_config.tensor_model_parallel_size)
        pp = int(engine_config.pipeline_model_parallel_size)
        vpp = engine_config.virtual_pipeline_model_parallel_size
        if world % (tp * pp):
            raise ValueError(
                f"megatron.tensor_model_parallel_size * pipeline_model_parallel_size = {tp}*{pp} must divide the "
                f"{world} ranks of the worker group"
            )
        sequence_parallel = bool(engine_config.sequence_parallel) and tp > 1
        if sequence_parallel and not torch.cuda.is_available():
            raise ValueError(
                "megatron.sequence_parallel=True needs CUDA (megatron-core allocates its sequence all-gather buffers "
                "on the current CUDA device); set megatron.sequence_parallel=False on CPU"
            )
        return cls(tp, pp, int(vpp) if vpp and vpp > 1 else None, world // (tp * pp), sequence_parallel)


def initialize_parallel_state(layout: ParallelLayout) -> None:
    """Create megatron-core's groups for ``layout`` (once per process; later engines must match)."""
    from megatron.core import parallel_state

    if not dist.is_initialized():
        raise RuntimeError(
            "the megatron engine needs torch.distributed initialised (torchrun, or dist.init_process_group with "
            "backend=verl.utils.device.get_nccl_backend())"
        )
    if parallel_state.model_parallel_is_initialized():
        existing = (
            parallel_state.get_tensor_model_parallel_world_size(),
            parallel_state.get_pipeline_model_parallel_world_size(),
            parallel_state.get_virtual_pipeline_model_parallel_world_size(),
        )
        wanted = (layout.tensor, layout.pipeline, layout.virtual_pipeline)
        if existing != wanted:
            raise ValueError(
                f"roles in one worker process must share the megatron layout (tensor, pipeline, virtual pipeline): "
                f"this process already uses {existing}, a role asked for {wanted}; make actor, ref and critic "
                "megatron.*_parallel_size equal"
            )
        return
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=layout.tensor,
        pipeline_model_parallel_size=layout.pipeline,
        virtual_pipeline_model_parallel_size=layout.virtual_pipeline,
    )
    if torch.cuda.is_available():
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        # megatron-core's activation recompute saves and restores CUDA RNG states through this tracker
        model_parallel_cuda_manual_seed(1234)


class Ranks:
    """This process's position and groups in megatron-core's layout (read after :func:`initialize_parallel_state`)."""

    def __init__(self):
        from megatron.core import parallel_state as ps

        self.tp_rank = ps.get_tensor_model_parallel_rank()
        self.tp_size = ps.get_tensor_model_parallel_world_size()
        self.tp_group = ps.get_tensor_model_parallel_group()
        self.pp_rank = ps.get_pipeline_model_parallel_rank()
        self.pp_size = ps.get_pipeline_model_parallel_world_size()
        self.pp_group = ps.get_pipeline_model_parallel_group()
        self.dp_rank = ps.get_data_parallel_rank()
        self.dp_size = ps.get_data_parallel_world_size()
        self.dp_group = ps.get_data_parallel_group()
        self.mp_group = ps.get_model_parallel_group()
        self.pp_ranks = dist.get_process_group_ranks(self.pp_group)
        self.embedding_group = ps.get_embedding_group() if self.pp_size > 1 else None
        self.in_embedding_group = self.pp_size > 1 and ps.is_rank_in_embedding_group()

    @property
    def is_first_stage(self) -> bool:
        return self.pp_rank == 0

    @property
    def is_last_stage(self) -> bool:
        return self.pp_rank == self.pp_size - 1

    @property
    def next_rank(self) -> int:
        """Global rank of the next pipeline rank (wrapping around: virtual stages form a ring)."""
        return self.pp_ranks[(self.pp_rank + 1) % self.pp_size]

    @property
    def prev_rank(self) -> int:
        return self.pp_ranks[(self.pp_rank - 1) % self.pp_size]

    @property
    def last_stage_rank(self) -> int:
        """Global rank of this pipeline group's last stage (where the loss and outputs are computed)."""
        return self.pp_ranks[-1]

    @property
    def is_collect_rank(self) -> bool:
        """The one rank per data-parallel group whose outputs the single controller collects."""
        return self.tp_rank == 0 and self.is_last_stage

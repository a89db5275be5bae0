"""Pipeline schedule: every micro-batch through every virtual stage, then (when training) the backward in reverse.

Without a pipeline (one stage) each micro-batch's backward runs right after its forward, so only one
micro-batch's activations are alive at a time (as the FSDP engine's gradient accumulation); the schedule below is
for two or more stages.

Virtual stage ``s = chunk * pp + pp_rank`` (``chunk`` = virtual-pipeline chunk of this rank); stage ``s`` takes
the activations of stage ``s - 1`` and hands its output to ``s + 1``, so the pipeline ranks form a ring. The order
is all forwards followed by all backwards in exactly the reverse order (the "GPipe" order, Huang et al. 2019),
the same on every rank, so each pair of neighbours exchanges messages in the same sequence. Sends are
non-blocking, receives blocking. Forwards go chunk-major (every micro-batch through chunk 0, then chunk 1, ...),
which keeps the ring busy, except with exactly two pipeline ranks and several chunks: there both ring directions
join the same pair of ranks, and NCCL runs a pair's point-to-point operations in issue order, so a chunk-major
sequence would wait on itself; micro-batch-major order (each micro-batch through all chunks) keeps every pair's
sends and receives alternating. Activations cross stages as ``pipeline_dtype`` tensors ``(T_local, 1, hidden)``
whose length every rank knows from the micro-batch itself.

Written with plain ``torch.distributed`` point-to-point calls, so it runs with gloo on CPU as well as NCCL on GPU
(megatron-core's own schedules allocate their bookkeeping tensors on ``"cuda"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from verl.workers.engine.megatron.packed import PackedMicroBatch
from verl.workers.engine.megatron.parallel import Ranks

# (model output of the last stage, micro-batch index) -> (loss to back-propagate or None, result kept for the caller)
LastStageStep = Callable[[torch.Tensor, int], tuple[torch.Tensor | None, Any]]


@dataclass
class _Sends:
    handles: list = field(default_factory=list)
    tensors: list = field(default_factory=list)

    def send(self, tensor: torch.Tensor, dst: int, group) -> None:
        tensor = tensor.contiguous()
        self.tensors.append(tensor)
        self.handles.append(dist.isend(tensor, dst=dst, group=group))

    def wait(self) -> None:
        for handle in self.handles:
            handle.wait()
        self.handles.clear()
        self.tensors.clear()


class PipelineSchedule:
    """Runs ``chunks`` (this rank's model chunks) over packed micro-batches; see the module docstring."""

    def __init__(
        self,
        chunks: Sequence[nn.Module],
        ranks: Ranks,
        hidden_size: int,
        pipeline_dtype: torch.dtype,
        autocast: Callable[[], AbstractContextManager] = nullcontext,
    ):
        self.chunks = list(chunks)
        self.ranks = ranks
        self.hidden_size = hidden_size
        self.pipeline_dtype = pipeline_dtype
        self.autocast = autocast
        self.num_stages = len(self.chunks) * ranks.pp_size

    def forward_order(self, num_micro_batches: int) -> list[tuple[int, int]]:
        """``(chunk, micro-batch)`` in forward order (see the module docstring); the backward reverses it."""
        chunks = range(len(self.chunks))
        if self.ranks.pp_size == 2 and len(self.chunks) > 1:
            return [(chunk, index) for index in range(num_micro_batches) for chunk in chunks]
        return [(chunk, index) for chunk in chunks for index in range(num_micro_batches)]

    def _stage(self, chunk: int) -> int:
        return chunk * self.ranks.pp_size + self.ranks.pp_rank

    def _activation_shape(self, micro_batch: PackedMicroBatch) -> tuple[int, int, int]:
        length = micro_batch.padded_length
        config = self.chunks[0].config
        if config.sequence_parallel:
            length //= self.ranks.tp_size
        return (length, 1, self.hidden_size)

    def _recv(self, micro_batch: PackedMicroBatch, src: int, device: torch.device) -> torch.Tensor:
        buffer = torch.empty(self._activation_shape(micro_batch), dtype=self.pipeline_dtype, device=device)
        dist.recv(buffer, src=src, group=self.ranks.pp_group)
        return buffer

    def _forward_chunk(self, chunk: int, micro_batch: PackedMicroBatch, input_tensor: torch.Tensor | None):
        model = self.chunks[chunk]
        model.set_input_tensor(input_tensor)
        with self.autocast():
            return model(
                input_ids=micro_batch.input_ids,
                position_ids=None,
                attention_mask=None,
                packed_seq_params=micro_batch.packed_seq_params,
            )

    def run(
        self, micro_batches: Sequence[PackedMicroBatch], last_stage_step: LastStageStep, forward_only: bool
    ) -> list[Any]:
        """Forward (and unless ``forward_only``, backward) every micro-batch; returns the results of
        ``last_stage_step`` in micro-batch order on the rank holding the last virtual stage, else ``[]``.

        Gradients accumulate into the parameters' ``.grad`` (no data-parallel reduction here)."""
        if self.num_stages == 1:
            return self._run_single_stage(micro_batches, last_stage_step, forward_only)
        device = micro_batches[0].input_ids.device if micro_batches else torch.device("cpu")
        sends = _Sends()
        results: list[Any] = []
        saved: list[tuple[int, int, torch.Tensor | None, torch.Tensor]] = []  # (chunk, mb, input, output-or-loss)
        grad_mode = nullcontext() if not forward_only else torch.no_grad()
        with grad_mode:
            for chunk, index in self.forward_order(len(micro_batches)):
                stage, micro_batch, input_tensor = self._stage(chunk), micro_batches[index], None
                if stage > 0:
                    input_tensor = self._recv(micro_batch, self.ranks.prev_rank, device)
                    input_tensor.requires_grad_(not forward_only)
                output = self._forward_chunk(chunk, micro_batch, input_tensor)
                if stage == self.num_stages - 1:
                    loss, result = last_stage_step(output, index)
                    results.append(result)
                    output = loss
                else:
                    sends.send(output.detach().to(self.pipeline_dtype), self.ranks.next_rank, self.ranks.pp_group)
                if not forward_only:
                    saved.append((chunk, index, input_tensor, output))
        sends.wait()
        if not forward_only:
            self._backward(saved, micro_batches, device, sends)
        return results

    def _run_single_stage(
        self, micro_batches: Sequence[PackedMicroBatch], last_stage_step: LastStageStep, forward_only: bool
    ) -> list[Any]:
        """One stage: forward, loss and backward of each micro-batch in turn (no activations kept across them)."""
        results: list[Any] = []
        with torch.no_grad() if forward_only else nullcontext():
            for index, micro_batch in enumerate(micro_batches):
                loss, result = last_stage_step(self._forward_chunk(0, micro_batch, None), index)
                results.append(result)
                if not forward_only:
                    loss.backward()
        self.chunks[0].set_input_tensor(None)
        return results

    def _backward(self, saved, micro_batches, device, sends: _Sends) -> None:
        for chunk, index, input_tensor, output in reversed(saved):
            stage = self._stage(chunk)
            if stage == self.num_stages - 1:
                output.backward()
            else:
                grad = self._recv(micro_batches[index], self.ranks.next_rank, device)
                output.backward(grad.to(output.dtype))
            if stage > 0:
                sends.send(input_tensor.grad.to(self.pipeline_dtype), self.ranks.prev_rank, self.ranks.pp_group)
        sends.wait()
        for model in self.chunks:
            model.set_input_tensor(None)

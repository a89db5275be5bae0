"""``AgentLoopManager``: ``generate_sequences`` for ``rollout.mode=async``, with the hybrid engine's contract.

One call::

    worker_group.wake_up()      every rank: weights synced into its engine, request server started
    agent-loop workers          the batch split over rollout.agent.num_workers actors, loops run concurrently
    worker_group.sleep()        every rank: server stopped, engine memory handed back to training

The replicas are the worker group's tensor-parallel groups; their first ranks take the requests. The output has the
keys of ``mode=sync`` (``prompts``, ``responses``, ``response_mask``, ``input_ids``, ``attention_mask``,
``position_ids``, ``rollout_log_probs``), ``meta_info["timing"]`` and ``meta_info["metrics"]`` (the weight-sync
metrics of the workers, and ``agent_loop/*`` and ``num_turns/*`` statistics).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from verl.experimental.agent_loop.server_manager import ServerHandle
from verl.experimental.agent_loop.trajectory import object_column
from verl.protocol import DataProto

RESTARTS = 3
"""Times an agent-loop worker is restarted (and its call retried) after its process dies."""
COUNT_FIELDS = ("num_tool_calls", "num_tool_errors", "tokenization_mismatch")
"""Per-trajectory counts from ``extra_fields`` summarised as ``agent_loop/<name>/mean``."""


def server_handles(worker_group: Any, tensor_parallel_size: int) -> list[ServerHandle]:
    """The replica leaders of ``worker_group``: every ``tensor_parallel_size``-th rank from 0."""
    method_name = f"{getattr(worker_group, 'method_prefix', '')}generate"
    return [
        ServerHandle(actor=actor, method_name=method_name, replica_rank=rank // tensor_parallel_size)
        for rank, actor in enumerate(worker_group.workers)
        if rank % tensor_parallel_size == 0
    ]


def split_rows(data: DataProto, parts: int) -> list[DataProto]:
    """Consecutive, nearly equal slices of ``data`` (no padding; empty slices dropped)."""
    bounds = np.linspace(0, len(data), parts + 1).round().astype(int)
    return [data.slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def concat_outputs(outputs: list[DataProto]) -> DataProto:
    """Concatenate worker outputs whose optional non-tensor fields may differ (missing ones filled with None)."""
    keys = sorted({key for output in outputs for key in output.non_tensor_batch})
    for output in outputs:
        for key in keys:
            if key not in output.non_tensor_batch:
                output.non_tensor_batch[key] = object_column([None] * len(output))
    return DataProto.concat(outputs)


def loop_metrics(per_sample: list[dict[str, float]], output: DataProto) -> dict[str, float]:
    """``agent_loop/{generate_sequences,tool_calls}/{min,max,mean}`` (seconds), tool-call counts and rates,
    and ``num_turns/{min,max,mean}``."""
    metrics: dict[str, float] = {}
    for name in ("generate_sequences", "tool_calls"):
        values = np.array([sample.get(name, 0.0) for sample in per_sample], dtype=float)
        metrics.update({f"agent_loop/{name}/{stat}": float(getattr(values, stat)()) for stat in ("min", "max", "mean")})
    turns = output.non_tensor_batch["__num_turns__"].astype(float)
    metrics.update({f"num_turns/{stat}": float(getattr(turns, stat)()) for stat in ("min", "max", "mean")})
    for name in COUNT_FIELDS:
        if name in output.non_tensor_batch:
            values = np.array([v or 0.0 for v in output.non_tensor_batch[name]], dtype=float)
            metrics[f"agent_loop/{name}/mean"] = float(values.mean())
            if name == "num_tool_calls":
                metrics["agent_loop/tool_call_rate"] = float((values > 0).mean())
    return metrics


class AgentLoopManager:
    """Drives the inference servers of ``worker_group`` (an actor-rollout group in ``mode=async``) with agent loops."""

    def __init__(self, config: Any, worker_group: Any):
        import ray

        from verl.experimental.agent_loop.worker import AgentLoopWorker

        self.config = config
        self.worker_group = worker_group
        rollout = config.actor_rollout_ref.rollout
        self.server_handles = server_handles(worker_group, int(rollout.tensor_model_parallel_size))
        # asyncio and I/O only: never wait for a free CPU. A worker lost to a node-level kill (Ray's OOM killer picks
        # the newest task, often this one) restarts and re-runs its slice: the servers hold no per-trajectory state.
        worker_cls = ray.remote(num_cpus=0, max_restarts=RESTARTS, max_task_retries=RESTARTS)(AgentLoopWorker)
        self.agent_loop_workers = [
            worker_cls.options(name=f"agent_loop_worker_{i}_{id(self):x}").remote(config, self.server_handles)
            for i in range(int(rollout.agent.num_workers))
        ]

    @property
    def world_size(self) -> int:
        """Rows need no padding here (the batch is split unevenly when it must): callers pad to a multiple of 1."""
        return 1

    def wake_up(self) -> dict[str, float]:
        return dict(self.worker_group.wake_up()[0])

    def sleep(self) -> dict[str, float]:
        return dict(self.worker_group.sleep()[0])

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """Roll out one trajectory per row of ``prompts`` (rows already repeated ``n`` times by the trainer)."""
        import ray

        start = time.perf_counter()
        metrics = self.wake_up()
        try:
            chunks = split_rows(prompts, len(self.agent_loop_workers))
            refs = [worker.generate_sequences.remote(chunk) for worker, chunk in zip(self.agent_loop_workers, chunks)]
            outputs = ray.get(refs)
        finally:
            metrics.update(self.sleep())
        per_sample = [sample for output in outputs for sample in output.meta_info.pop("metrics", [])]
        output = concat_outputs(outputs)
        metrics.update(loop_metrics(per_sample, output))
        output.meta_info = {
            **dict(prompts.meta_info),
            "timing": {"generate_sequences": time.perf_counter() - start},
            "metrics": metrics,
        }
        return output

"""Weight sync from an FSDP(2) actor into the colocated SGLang engine, as "enter / leave rollout mode".

Enter: resume the engine's weight memory (if released), send the actor's full parameters bucket by bucket, resume
the KV cache and CUDA graphs. Each bucket is one flat GPU tensor (SGLang's ``flattened_bucket`` format) that every
worker of the tensor-parallel group shares with the scheduler on its own GPU by CUDA IPC: the scheduler copies
straight from the worker's memory into its model (``load_weights`` shards and casts), so nothing crosses the CPU.
Leave: ``release_memory_occupation`` frees weights, KV cache and CUDA graphs (SGLang's memory saver) when
``free_cache_engine`` is set, so training gets the memory back; this process's cached blocks stay cached for training
(:class:`verl.workers.sharding_manager.memory.WakeMemory` decides when they go back to the device).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from verl.workers.sharding_manager.base import TensorParallelShardingManager
from verl.workers.sharding_manager.memory import WakeMemory, memory_metrics

DEFAULT_BUCKET_BYTES = 512 << 20
TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def serialize_bucket(named_tensors: list[tuple[str, torch.Tensor]]) -> tuple[bytes, torch.Tensor]:
    """One flat tensor holding ``named_tensors`` and SGLang's serialized handle to it (CUDA IPC for a GPU tensor).

    Returns ``(payload, flat)``: the caller keeps ``flat`` alive until the engine has loaded the bucket."""
    from sglang.srt.utils import MultiprocessingSerializer
    from sglang.srt.utils.patch_torch import monkey_patch_torch_reductions
    from sglang.srt.weight_sync.tensor_bucket import FlattenedTensorBucket

    monkey_patch_torch_reductions()  # name the device by UUID: the scheduler numbers GPUs differently
    bucket = FlattenedTensorBucket(named_tensors=named_tensors)
    flat = bucket.get_flattened_tensor()
    payload = MultiprocessingSerializer.serialize({"flattened_tensor": flat, "metadata": bucket.get_metadata()})
    return payload, flat


def iter_buckets(pairs, bucket_bytes: int):
    """Group ``(name, tensor)`` pairs into lists of about ``bucket_bytes``."""
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in pairs:
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
        if size >= bucket_bytes:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


class FSDPSGLangShardingManager(TensorParallelShardingManager):
    """Sync ``module``'s weights into ``rollout``'s SGLang engine on every ``with manager:``."""

    def __init__(self, module: nn.Module, rollout: Any, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        super().__init__()
        self.module = module
        self.rollout = rollout
        self.bucket_bytes = bucket_bytes
        self.free_cache_engine = bool(rollout.config.free_cache_engine)
        self.engine_dtype = TORCH_DTYPES.get(rollout.engine_kwargs["dtype"])
        self.is_released = False
        self.wake_memory = WakeMemory()
        self.tp_size = rollout.layout.size
        self.tp_rank = rollout.layout.rank
        self.tp_cpu_group = rollout.cpu_group

    @property
    def engine(self):
        return self.rollout.engine

    def _gather_payloads(self, payload: bytes) -> list[bytes] | None:
        """Every rank's payload on the group's first rank (rank order = scheduler order); None elsewhere."""
        if self.tp_cpu_group is None:
            return [payload]
        gathered: list[Any] = [None] * self.tp_size if self.tp_rank == 0 else None
        dist.gather_object(payload, gathered, dst=self.rollout.layout.first, group=self.tp_cpu_group)
        return gathered

    def iter_weights(self, dtype: torch.dtype | None):
        """``(hf_name, full tensor)`` on the actor's device, LoRA merged, shards cast before the gather; every rank
        walks the same tensors, so the FSDP all-gathers line up."""
        from verl.workers.engine.fsdp.weights import iter_full_state_dict

        return iter_full_state_dict(self.module, bucket_bytes=self.bucket_bytes, dtype=dtype)

    def sync_weights(self) -> int:
        """Send the actor's weights (:meth:`iter_weights`) to the engine; returns the number of tensors sent.

        Every flat bucket stays alive until the engine has answered for the last one and flushed its cache: the
        schedulers read the buckets in place, and their copies, queued on their own CUDA streams, are long done
        by then. The sync so holds one extra copy of the weights in the engine dtype."""
        live: list[torch.Tensor] = []
        count = 0
        for named_tensors in iter_buckets(self.iter_weights(self.engine_dtype), self.bucket_bytes):
            payload, flat = serialize_bucket(named_tensors)
            live.append(flat)
            count += len(named_tensors)
            del named_tensors  # the flat copy holds them now
            payloads = self._gather_payloads(payload)
            if self.engine is not None:
                success, message = self.engine.update_weights_from_tensor(
                    named_tensors=payloads, load_format="flattened_bucket", flush_cache=False
                )
                if not success:
                    raise RuntimeError(f"SGLang weight update failed: {message}")
        if self.engine is not None:
            self.engine.flush_cache()  # radix-cache entries were computed by the old weights
        self.rollout.barrier()
        live.clear()
        return count

    def enter_rollout_mode(self) -> None:
        start = self.begin_laps()
        if self.is_released:
            self.metrics.update(self.wake_memory.before_wake())
        self.lap("empty_cache")
        if self.is_released:
            if self.engine is not None:
                self.engine.resume_memory_occupation(tags=["weights"])
            self.rollout.barrier()
        self.lap("wake_weights")
        self.metrics["rollout/weight_tensors_synced"] = float(self.sync_weights())
        self.lap("send")
        if self.is_released:
            if self.engine is not None:
                self.engine.resume_memory_occupation(tags=["kv_cache", "cuda_graph"])
            self.rollout.barrier()
            self.is_released = False
        self.lap("wake_cache")
        self.metrics["timing_s/update_weights"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("rollout"))

    def _release_engine(self) -> None:
        if self.engine is not None:
            self.engine.release_memory_occupation()
        self.rollout.barrier()

    def exit_rollout_mode(self) -> None:
        start = time.perf_counter()
        if self.free_cache_engine:
            self.wake_memory.release(self._release_engine)
            self.is_released = True
        self.metrics["timing_s/release_memory"] = time.perf_counter() - start
        self.metrics.update(memory_metrics("training"))

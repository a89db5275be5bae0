"""Workers of the one-step off-policy recipe: the actor on the trainer pool, generation on the rollout pool.

``OneStepActorWorker`` is :class:`~verl.workers.fsdp_workers.ActorRolloutRefWorker` (role ``actor``) that can also
send its weights; ``OneStepRolloutWorker`` holds only the rollout engine and receives them. The driver pairs the
calls: ``rollout.receive_weights()`` (non-blocking), ``actor.send_weights()``, then generation, which the rollout
actor runs after the weights arrived (a Ray actor executes its calls in order).
"""

from __future__ import annotations

import time

import torch

from recipe.one_step_off_policy.weight_sync import (
    DEFAULT_BUCKET_BYTES,
    TensorInfo,
    WeightSyncGroup,
    free_address,
    receive_weights,
    send_weights,
    weights_info,
)
from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import current_device, get_nccl_backend, is_cuda_available
from verl.workers.config.rollout import ROLLOUT_DTYPES
from verl.workers.fsdp_workers import ROLLOUT_MESH, ActorRolloutRefWorker, RolloutRole, load_tokenizer

_DTYPES = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "float32": torch.float32,
    "fp32": torch.float32,
}


def sync_backend() -> str:
    """``nccl`` between GPUs, ``gloo`` on CPU."""
    return "nccl" if is_cuda_available() else "gloo"


def rollout_dtype(name: str) -> torch.dtype | None:
    """The dtype weights travel in: the rollout engine's (``auto``: as the actor holds them)."""
    if name not in ROLLOUT_DTYPES:
        raise ValueError(f"actor_rollout_ref.rollout.dtype={name!r}; allowed: {ROLLOUT_DTYPES}")
    return _DTYPES.get(name)


class OneStepActorWorker(ActorRolloutRefWorker):
    """The actor (``role="actor"``) plus the sending side of the weight broadcast (group rank 0 = actor rank 0)."""

    def __init__(self, config, role: str = "actor"):
        super().__init__(config, role)
        self._sync_group: WeightSyncGroup | None = None
        self._weights_info: list[TensorInfo] | None = None

    def _named_weights(self):
        """The actor's full weights in Hugging Face naming, in the rollout's dtype (a collective over actor ranks)."""
        actor = self._require("actor", "weight sync")
        device = current_device() if is_cuda_available() else None
        return actor.engine.iter_full_state_dict(dtype=rollout_dtype(self.config.rollout.dtype), device=device)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def weights_info(self) -> list[TensorInfo]:
        """Names, shapes and dtypes of the broadcast, in order (every rank computes it; the driver keeps rank 0's)."""
        self._weights_info = weights_info(self._named_weights())
        return self._weights_info

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def weight_sync_address(self) -> tuple[str, int]:
        """Where group rank 0 (this group's rank 0) will host the rendezvous store."""
        return free_address()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_weight_sync(self, host: str, port: int, world_size: int) -> None:
        """Rank 0 joins the broadcast group as its rank 0; the other actor ranks only help gather shards."""
        if self.rank == 0:
            self._sync_group = WeightSyncGroup(host, port, 0, world_size, sync_backend())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def send_weights(self, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> dict[str, float]:
        """Broadcast the current weights to the rollout pool; returns ``weight_sync/*`` metrics."""
        if self._weights_info is None:
            raise RuntimeError("send_weights before weights_info: the driver sets the broadcast up first")
        start = time.perf_counter()
        sent = send_weights(self._sync_group, self._named_weights(), self._weights_info, bucket_bytes)
        return {"weight_sync/send_s": time.perf_counter() - start, "weight_sync/bytes": float(sent)}


class _ReceivedWeights:
    """Stands in for the actor module of a rollout-only worker: its ``state_dict()`` is the last weights received,
    which the vLLM weight-sync manager streams into the engine on every generation (as it would the actor's)."""

    def __init__(self) -> None:
        self.weights: dict[str, torch.Tensor] = {}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.weights


class OneStepRolloutWorker(Worker):
    """Generation only (``config`` is the ``actor_rollout_ref`` section): the rollout engine and the receiving side
    of the weight broadcast (rollout rank i is group rank 1 + i).

    ``vllm`` loads the received tensors into its engine at the next generation; ``hf`` generates with a frozen
    FSDP copy of the policy, whose shards are overwritten with the received tensors.
    """

    def __init__(self, config, role: str = "rollout"):
        super().__init__()
        if role != "rollout":
            raise ValueError(f"OneStepRolloutWorker only generates; got role {role!r}")
        self.config = config
        self.init_process_group(backend=get_nccl_backend())
        self._sync_group: WeightSyncGroup | None = None
        self._weights_info: list[TensorInfo] | None = None
        self.rollout: RolloutRole | None = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.actor.role_utils import with_fields

        self.tokenizer = load_tokenizer(self.config.model)
        self._register_dispatch_collect_info(ROLLOUT_MESH, dp_rank=self.rank, is_collect=True)
        # A dedicated rollout pool never hands its memory to training: keep the engine awake between steps.
        rollout_config = with_fields(self.config.rollout, free_cache_engine=False)
        if rollout_config.name == "hf":
            from verl.workers.actor.roles import ReferenceRole

            self._policy = ReferenceRole(self.config.model, self.config.ref or self.config.actor).engine.module
            source = self._policy
        else:
            self._policy = None
            source = _ReceivedWeights()
        self._received = source
        self.rollout = RolloutRole(rollout_config, self.config.model, self.tokenizer, source)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def set_weights_info(self, infos: list[TensorInfo]) -> None:
        self._weights_info = list(infos)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    def init_weight_sync(self, host: str, port: int, world_size: int) -> None:
        """Join the broadcast group as rank 1 + this rank (non-blocking: the actor's rank 0 joins meanwhile)."""
        self._sync_group = WeightSyncGroup(host, port, 1 + self.rank, world_size, sync_backend())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    def receive_weights(self, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> float:
        """Receive the actor's weights (non-blocking for the driver); returns the seconds it took."""
        if self._sync_group is None or self._weights_info is None:
            raise RuntimeError("receive_weights before init_weight_sync / set_weights_info")
        start = time.perf_counter()
        received = receive_weights(self._sync_group, self._weights_info, current_device(), bucket_bytes)
        if self._policy is not None:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

            set_model_state_dict(self._policy, received, options=StateDictOptions(full_state_dict=True))
        else:
            self._received.weights = received
        return time.perf_counter() - start

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ROLLOUT_MESH))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self.rollout.generate_sequences(prompts)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=ROLLOUT_MESH), blocking=False)
    def async_generate_sequences(self, prompts: DataProto) -> DataProto:
        """:meth:`generate_sequences` returning at once with a ``DataProtoFuture`` (generation overlaps training)."""
        return self.rollout.generate_sequences(prompts)

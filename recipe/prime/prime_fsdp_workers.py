"""``PRIMERewardModelWorker``: the implicit PRM as a worker group (verl's name), one process per device of its pool."""

from __future__ import annotations

import time

from recipe.prime.prime_dp_rm import DataParallelPRIMERewardModel
from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.checkpoint import FSDPCheckpointManager
from verl.utils.device import get_nccl_backend
from verl.workers.fsdp_workers import load_tokenizer

__all__ = ["PRIMERewardModelWorker"]

PRM_MESH = "prime_rm"
"""Dispatch mesh of the PRM group (every rank is one data-parallel rank)."""


class PRIMERewardModelWorker(Worker):
    """``config`` is the whole PRIME config: the PRM reads ``reward_model``, and sizes its updates from
    ``actor_rollout_ref.rollout.n`` and the actor's ``ppo_mini_batch_size``."""

    def __init__(self, config):
        super().__init__()
        self.config = config.reward_model
        self.rollout_n = int(config.actor_rollout_ref.rollout.n)
        self.actor_mini_batch_size = int(config.actor_rollout_ref.actor.ppo_mini_batch_size)
        self.init_process_group(backend=get_nccl_backend())
        self.rm: DataParallelPRIMERewardModel | None = None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        self._register_dispatch_collect_info(PRM_MESH, dp_rank=self.rank, is_collect=True)
        self.rm = DataParallelPRIMERewardModel(self.config, self.rollout_n, self.actor_mini_batch_size)
        engine = self.rm.engine
        self.checkpoint_manager = FSDPCheckpointManager(
            engine.module, engine.optimizer, engine.lr_scheduler, load_tokenizer(self.config.model)
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=PRM_MESH))
    def compute_rm_score(self, data: DataProto) -> DataProto:
        """``rm_scores (bs, R)`` of the current PRM; ``reward_model/reward`` and ``raw_reward`` in the metrics."""
        scores, metrics = self.rm.compute_rm_score(data)
        return DataProto.from_dict(tensors={"rm_scores": scores}, meta_info={"metrics": metrics})

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=PRM_MESH))
    def update_rm(self, data: DataProto) -> DataProto:
        """Train the PRM on ``acc`` for one pass; ``rm_scores`` are those of the update's forward passes."""
        start = time.perf_counter()
        scores, metrics = self.rm.update_rm(data)
        metrics["timing_s/update_rm"] = [time.perf_counter() - start]
        return DataProto.from_dict(tensors={"rm_scores": scores}, meta_info={"metrics": metrics})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        self.rm.engine.load_optimizer()
        self.checkpoint_manager.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)
        self.rm.engine.offload_optimizer()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self.rm.engine.load_optimizer()
        self.checkpoint_manager.load_checkpoint(local_path, hdfs_path, del_local_after_load)
        self.rm.engine.offload_optimizer()

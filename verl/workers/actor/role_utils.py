"""Small helpers the worker roles share: per-rank batch sizes, config copies, step timing and memory, the update
metrics and the checkpoint calls."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from verl.utils.profiler import max_memory_allocated_gb


def with_fields(config, **updates):
    """A copy of ``config`` (typed dataclass or DictConfig) with ``updates`` applied; the original is untouched."""
    if dataclasses.is_dataclass(config):
        clone = copy.copy(config)
        for key, value in updates.items():
            setattr(clone, key, value)
        return clone
    from omegaconf import OmegaConf, open_dict

    clone = copy.deepcopy(config)
    with open_dict(clone):
        for key, value in updates.items():
            OmegaConf.update(clone, key, value)
    return clone


def per_rank_mini_batch_size(config, rollout_n: int, dp_size: int, key: str) -> int:
    """verl's normalisation: ``ppo_mini_batch_size`` counts prompts over all ranks; a rank updates on
    ``ppo_mini_batch_size * rollout_n / dp_size`` sequences per optimizer step."""
    sequences = int(config.ppo_mini_batch_size) * int(rollout_n)
    if sequences % dp_size:
        raise ValueError(
            f"{key}.ppo_mini_batch_size * rollout.n = {sequences} sequences is not divisible by the "
            f"data-parallel size {dp_size}"
        )
    return sequences // dp_size


def make_flops_counter(hf_config, output_size: int | None = None):
    """A :class:`FlopsCounter` for the dense architectures it knows, else None (no MFU metric)."""
    from verl.utils.flops_counter import DENSE_MODEL_TYPES, FlopsCounter

    if hf_config.model_type not in DENSE_MODEL_TYPES:
        return None
    return FlopsCounter(hf_config, output_size=output_size)


def phase_mfu(
    flops_counter, data, elapsed: float, engine, backward: bool, passes: int = 1, head_tokens: int | None = None
) -> float | None:
    """MFU of a phase that ran ``passes`` passes over ``data`` in ``elapsed`` seconds on this rank. The whole
    batch's lengths (``meta_info['global_token_num']``, set by the trainer) over all of ``engine``'s ranks when
    known, else this rank's rows over the ranks that compute them together (``world_size // dp_size``: the
    sequence-parallel group of FSDP, the tensor x pipeline group of Megatron). ``head_tokens``: the positions of
    this rank's rows that the output layer ran on (the actor's ``output_layer_tokens``; None: every token), scaled
    with the tokens to the whole batch. None without a counter."""
    if flops_counter is None:
        return None
    local = data.batch["attention_mask"].sum(-1).tolist()
    seqlens, world = data.meta_info.get("global_token_num"), engine.world_size
    if seqlens is None:  # only this rank's share is known (computed by its model- or sequence-parallel group)
        seqlens, world = local, engine.world_size // engine.dp_size
    head = None if head_tokens is None else head_tokens * sum(seqlens) / max(sum(local), 1)
    return passes * flops_counter.mfu(seqlens, elapsed, world, backward=backward, head_tokens=head)


@contextmanager
def timed(out: dict, key: str):
    """Store the wall time of the block in ``out[key]`` (seconds)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        out[key] = time.perf_counter() - start


def forward_with_metrics(
    metric: str, engine, flops_counter, data, forward: Callable[[], Any], head_tokens: int | None = None
) -> tuple[Any, dict]:
    """``(forward(), metrics)`` for a forward-only pass over ``data``: ``metrics`` is ``{metric: MFU}`` (empty when
    there is no counter; ``head_tokens`` as in :func:`phase_mfu`)."""
    start = time.perf_counter()
    out = forward()
    mfu = phase_mfu(flops_counter, data, time.perf_counter() - start, engine, backward=False, head_tokens=head_tokens)
    return out, {} if mfu is None else {metric: mfu}


def update_with_metrics(
    role_name: str,
    engine,
    flops_counter,
    data,
    epochs: int,
    update: Callable[[], dict],
    head_tokens: int | None = None,
) -> dict:
    """Run ``update()`` (the role's PPO update over ``data``, ``epochs`` passes) with the optimizer state on the device,
    then add ``perf/mfu/<role_name>``, ``perf/max_memory_allocated_gb`` and ``<role_name>/lr`` to its metrics; advances
    the LR schedule by one step (``head_tokens`` as in :func:`phase_mfu`)."""
    engine.load_optimizer()
    start = time.perf_counter()
    metrics = update()
    elapsed = time.perf_counter() - start
    engine.offload_optimizer()
    mfu = phase_mfu(flops_counter, data, elapsed, engine, backward=True, passes=epochs, head_tokens=head_tokens)
    if mfu is not None:
        metrics[f"perf/mfu/{role_name}"] = mfu
    metrics["perf/max_memory_allocated_gb"] = max_memory_allocated_gb()
    metrics[f"{role_name}/lr"] = engine.lr_scheduler_step()
    return metrics


class CheckpointedRole:
    """``save_checkpoint`` / ``load_checkpoint`` of a role holding an ``engine`` and its ``checkpoint_manager``: the
    optimizer state is on the device while the manager reads it (and, with ``optimizer_on_device_to_save``, while it
    writes it), and offloaded again after."""

    optimizer_on_device_to_save = False
    """The engine's manager reads the optimizer state from the device when saving (Megatron's)."""

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        if self.optimizer_on_device_to_save:
            self.engine.load_optimizer()
        self.checkpoint_manager.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)
        if self.optimizer_on_device_to_save:
            self.engine.offload_optimizer()

    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        self.engine.load_optimizer()
        self.checkpoint_manager.load_checkpoint(local_path, hdfs_path, del_local_after_load)
        self.engine.offload_optimizer()

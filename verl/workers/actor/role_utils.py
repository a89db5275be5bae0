"""Small helpers the worker roles share: per-rank batch sizes, config copies, step timing and memory."""

from __future__ import annotations

import copy
import dataclasses
import resource
import time
from contextlib import contextmanager

import torch


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


def phase_mfu(flops_counter, data, elapsed: float, engine, backward: bool, passes: int = 1) -> float | None:
    """MFU of a phase that ran ``passes`` passes over ``data`` in ``elapsed`` seconds on this rank. The whole
    batch's lengths (``meta_info['global_token_num']``, set by the trainer) over all of ``engine``'s ranks when
    known, else this rank's rows over its sequence-parallel group. None without a counter."""
    if flops_counter is None:
        return None
    seqlens, world = data.meta_info.get("global_token_num"), engine.world_size
    if seqlens is None:  # only this rank's share is known (computed by its sequence-parallel group)
        seqlens, world = data.batch["attention_mask"].sum(-1).tolist(), engine.ulysses.sp_size
    return passes * flops_counter.mfu(seqlens, elapsed, world, backward=backward)


def max_memory_allocated_gb() -> float:
    """Peak accelerator memory of this process in GB; on CPU the peak resident set size."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


@contextmanager
def timed(out: dict, key: str):
    """Store the wall time of the block in ``out[key]`` (seconds)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        out[key] = time.perf_counter() - start

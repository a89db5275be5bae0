"""SFT checkpoints: the FSDP engine's model + optimizer + LR schedule and the data-stream position.

Layout under ``trainer.default_local_dir``::

    global_step_{N}/model_optim/, extra_state_rank_{r}.pt, huggingface/, fsdp_config.json
                                 written by ``FSDPCheckpointManager`` (sharded DCP state, per-rank RNG)
    global_step_{N}/data.pt      ``{"global_step", "data_stream": {"epoch", "batches_consumed"}}``
    global_step_{N}/checkpoint_manifest.json   files, sizes and sha256, written after the others; checked on resume
    latest_checkpointed_iteration.txt   N, written last

``python -m verl.model_merger merge --backend fsdp --local_dir .../global_step_N --target_dir <hf>`` turns a
checkpoint into a Hugging Face model folder (LoRA merged).
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from verl.trainer.ppo.checkpointing import (
    global_step_dir,
    load_trainer_state,
    prune_old_checkpoints,
    resolve_resume_path,
    save_trainer_state,
    step_of,
    write_manifest,
    write_tracker,
)
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def save_sft_checkpoint(
    manager: FSDPCheckpointManager,
    root: str,
    global_step: int,
    stream_state: dict,
    max_ckpt_to_keep: int | None,
    checksums: bool = True,
) -> str:
    """Write ``global_step_{global_step}`` under ``root`` (collective), its manifest (sha256 of each file when
    ``checksums``; resume verifies it), then the tracker; returns the folder."""
    path = global_step_dir(root, global_step)
    manager.save_checkpoint(local_path=path, global_step=global_step)
    if dist.get_rank() == 0:
        save_trainer_state(path, {"global_step": global_step, "data_stream": stream_state})
        write_manifest(path, checksums=checksums)
        write_tracker(root, global_step)
        prune_old_checkpoints(root, max_ckpt_to_keep)
    _barrier()
    return path


def load_sft_checkpoint(manager: FSDPCheckpointManager, trainer_config: Any) -> dict | None:
    """Restore from the checkpoint ``trainer.resume_mode`` selects (collective); returns the trainer state
    ``{"global_step", "data_stream"}``, or None on a fresh start."""
    path = resolve_resume_path(trainer_config)
    if path is None:
        return None
    step_of(path)
    state = load_trainer_state(path)  # first: the manager then restores each rank's own RNG state
    manager.load_checkpoint(path)
    return state

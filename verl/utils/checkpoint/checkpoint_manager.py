"""What every engine's checkpoint manager shares: the ``save_contents`` / ``load_contents`` keys, the atomic save
frame, the per-rank extra state (LR scheduler, RNG), the Hugging Face export and the rotation of old folders.

A backend (:mod:`~verl.utils.checkpoint.fsdp_checkpoint_manager`, :mod:`~verl.utils.checkpoint.
megatron_checkpoint_manager`) subclasses :class:`BaseCheckpointManager` and writes its sharded model / optimizer
state, its Hugging Face files and its full weights; the frame and the folder layout around them are the same::

    <sharded state>/         the backend's DCP folder
    extra_state_rank_{r}.pt  lr scheduler and RNG states of rank r
    <backend>_config.json    what the model merger reads
    huggingface/             HF config, generation config and tokenizer (plus safetensors with ``hf_model``)
"""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Iterator

import numpy as np
import torch
import torch.distributed as dist

from verl.utils.checkpoint.atomic_dir import atomic_checkpoint_dir
from verl.workers.config.roles import CheckpointConfig

HF_DIR = "huggingface"
KNOWN_CONTENTS = ("model", "optimizer", "extra", "hf_model")
STEP_DIR = re.compile(r"global_step_(\d+)")


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _sibling_step_folders(local_path: str) -> list[str]:
    """``[.../global_step_K/<role>]`` that exist next to ``local_path`` (same role), oldest first; empty when
    ``local_path`` is not inside a ``global_step_N`` folder."""
    step_dir, role = os.path.split(local_path)
    root, step_name = os.path.split(step_dir)
    if not STEP_DIR.fullmatch(step_name):
        return []
    found = []
    for name in os.listdir(root):
        match = STEP_DIR.fullmatch(name)
        if match and os.path.isdir(os.path.join(root, name, role)):
            found.append((int(match.group(1)), os.path.join(root, name, role)))
    return [path for _, path in sorted(found)]


class BaseCheckpointManager:
    """Save/load an engine's state in the folder layout above; ``processing_class`` is the tokenizer.

    Subclasses write and read the sharded state (``_save_sharded_state`` / ``_load_sharded_state``), the HF files
    (``_save_hf_files``, rank 0) and the full weights (``_iter_full_state_dict``); ``_on_device`` / ``_off_device``
    bracket a save or a load for engines that offload their parameters.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer | None = None,
        lr_scheduler=None,
        processing_class=None,
        checkpoint_config: CheckpointConfig | None = None,
        role: str = "actor",
    ):
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.processing_class = processing_class
        self.checkpoint_config = checkpoint_config or CheckpointConfig()
        self.role = role
        self.previous_saved_paths: list[str] = []

    # ------------------------------------------------------------------ backend hooks
    def _save_sharded_state(self, folder: str, contents: set[str]) -> None:
        raise NotImplementedError

    def _load_sharded_state(self, local_path: str, contents: set[str]) -> None:
        raise NotImplementedError

    def _save_hf_files(self, folder: str) -> None:
        raise NotImplementedError

    def _iter_full_state_dict(self) -> Iterator[tuple[str, torch.Tensor]]:
        raise NotImplementedError

    def _on_device(self) -> None:
        """Before a save or a load: bring offloaded parameters back (nothing to do by default)."""

    def _off_device(self) -> None:
        """After a save or a load: offload the parameters again (nothing to do by default)."""

    def _after_lr_scheduler_load(self) -> None:
        """After the LR scheduler's state is restored (nothing to do by default)."""

    # ------------------------------------------------------------------ save
    def _contents(self, which: str) -> set[str]:
        """``checkpoint.save_contents`` / ``load_contents`` (verl's keys: model, optimizer, extra, hf_model)."""
        config = self.checkpoint_config
        contents = getattr(config, which)
        if contents is None and which == "load_contents":
            contents = config.save_contents
        contents = set(contents)
        unknown = contents - set(KNOWN_CONTENTS)
        if unknown:
            raise ValueError(f"checkpoint.{which} has unknown entries {sorted(unknown)}; known: {list(KNOWN_CONTENTS)}")
        return contents

    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None = None, global_step: int = 0, max_ckpt_to_keep: int | None = None
    ) -> None:
        """Write the checkpoint to ``local_path`` (collective). Keeps at most ``max_ckpt_to_keep`` of the folders
        this manager saved (oldest removed after the new one is complete)."""
        if hdfs_path is not None:
            raise NotImplementedError("hdfs_path is not supported; copy the local checkpoint folder instead")
        local_path = os.path.abspath(local_path)
        contents = self._contents("save_contents")
        self._on_device()
        with atomic_checkpoint_dir(local_path) as tmp:
            self._save_sharded_state(tmp, contents)
            if "extra" in contents:
                extra = {"rng": rng_state(), "global_step": global_step}
                if self.lr_scheduler is not None:
                    extra["lr_scheduler"] = self.lr_scheduler.state_dict()
                torch.save(extra, os.path.join(tmp, f"extra_state_rank_{_rank()}.pt"))
            if _rank() == 0:
                self._save_hf_files(tmp)
            if "hf_model" in contents:
                self._save_hf_model(os.path.join(tmp, HF_DIR))
        self._off_device()
        self._rotate(local_path, max_ckpt_to_keep)

    def _save_hf_model(self, hf_dir: str) -> None:
        """Full weights (LoRA merged) as safetensors next to the config: a ready Hugging Face model folder.
        Collective: every rank gathers, rank 0 writes."""
        full = {name: tensor.cpu() for name, tensor in self._iter_full_state_dict()}
        if _rank() == 0:
            from verl.model_merger.base_model_merger import save_hf_model

            save_hf_model(full, hf_dir, hf_dir)
        _barrier()

    def _rotate(self, local_path: str, max_ckpt_to_keep: int | None) -> None:
        """Remove this role's folders beyond the newest ``max_ckpt_to_keep``. Under a ``global_step_N/<role>``
        layout the older steps are found on disk (so rotation survives restarts); otherwise only the folders
        saved by this manager are considered."""
        if local_path in self.previous_saved_paths:
            self.previous_saved_paths.remove(local_path)
        self.previous_saved_paths.append(local_path)
        if not max_ckpt_to_keep or max_ckpt_to_keep <= 0:
            return
        saved = _sibling_step_folders(local_path) or list(self.previous_saved_paths)
        stale = saved[:-max_ckpt_to_keep]
        if _rank() == 0:
            for old in stale:
                shutil.rmtree(old, ignore_errors=True)
        self.previous_saved_paths = [p for p in self.previous_saved_paths if p not in stale]
        _barrier()

    # ------------------------------------------------------------------ load
    def load_checkpoint(self, local_path: str, hdfs_path: str | None = None, del_local_after_load: bool = False):
        """Restore model, optimizer, scheduler and RNG from ``local_path`` (collective)."""
        if hdfs_path is not None:
            raise NotImplementedError("hdfs_path is not supported; load from a local folder")
        if local_path is None:
            return
        contents = self._contents("load_contents")
        self._on_device()
        self._load_sharded_state(local_path, contents)
        extra_path = os.path.join(local_path, f"extra_state_rank_{_rank()}.pt")
        if "extra" in contents and os.path.exists(extra_path):
            extra = torch.load(extra_path, weights_only=False)
            set_rng_state(extra["rng"])
            if self.lr_scheduler is not None and "lr_scheduler" in extra:
                self.lr_scheduler.load_state_dict(extra["lr_scheduler"])
                self._after_lr_scheduler_load()
        self._off_device()
        _barrier()
        if del_local_after_load and _rank() == 0:
            shutil.rmtree(local_path, ignore_errors=True)

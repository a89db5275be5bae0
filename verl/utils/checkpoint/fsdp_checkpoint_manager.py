"""Checkpoints of an FSDP2 engine through ``torch.distributed.checkpoint`` (DCP).

Layout of ``local_path`` (e.g. ``.../global_step_N/actor``)::

    model_optim/            DCP folder: sharded model + optimizer state (reshardable to another world size)
    extra_state_rank_{r}.pt lr scheduler state and RNG states of rank r
    fsdp_config.json        world size, role, LoRA scaling (read by the model merger)
    huggingface/            HF config, generation config and tokenizer (for export)

The folder is written atomically (see ``atomic_dir``). The trainer's tracker file
(``latest_checkpointed_iteration.txt``) is written by the trainer after every role has saved.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from verl.utils.checkpoint.atomic_dir import atomic_checkpoint_dir
from verl.workers.config.roles import CheckpointConfig
from verl.workers.engine.fsdp.weights import is_peft_model, iter_full_state_dict, lora_scaling

MODEL_OPTIM_DIR = "model_optim"
HF_DIR = "huggingface"
META_FILE = "fsdp_config.json"
KNOWN_CONTENTS = ("model", "optimizer", "extra", "hf_model")
STEP_DIR = re.compile(r"global_step_(\d+)")


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


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


def _hf_class_name(module: nn.Module) -> str:
    """Name of the Hugging Face class behind ``module`` (FSDP2 swaps in a subclass named ``FSDP<cls>``)."""
    for cls in type(module).__mro__:
        if cls.__module__.startswith("transformers."):
            return cls.__name__
    return type(module).__name__


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


class FSDPCheckpointManager:
    """Save/load ``model`` (FSDP2), ``optimizer`` and ``lr_scheduler``; ``processing_class`` is the tokenizer."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        lr_scheduler=None,
        processing_class=None,
        checkpoint_config: CheckpointConfig | None = None,
        role: str = "actor",
    ):
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.processing_class = processing_class
        self.checkpoint_config = checkpoint_config or CheckpointConfig()
        self.role = role
        self.previous_saved_paths: list[str] = []

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

    def _state(self, contents: set[str]) -> dict:
        with_optimizer = self.optimizer is not None and "optimizer" in contents
        model_state, optim_state = get_state_dict(self.model, self.optimizer if with_optimizer else [])
        state = {"model": model_state} if "model" in contents else {}
        if with_optimizer:
            state["optim"] = optim_state
        return state

    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None = None, global_step: int = 0, max_ckpt_to_keep: int | None = None
    ) -> None:
        """Write the checkpoint to ``local_path`` (collective). Keeps at most ``max_ckpt_to_keep`` of the folders
        this manager saved (oldest removed after the new one is complete)."""
        if hdfs_path is not None:
            raise NotImplementedError("hdfs_path is not supported; copy the local checkpoint folder instead")
        local_path = os.path.abspath(local_path)
        contents = self._contents("save_contents")
        with atomic_checkpoint_dir(local_path) as tmp:
            state = self._state(contents)
            if state:
                dcp.save(state, checkpoint_id=os.path.join(tmp, MODEL_OPTIM_DIR))
            if "extra" in contents:
                extra = {"rng": rng_state(), "global_step": global_step}
                if self.lr_scheduler is not None:
                    extra["lr_scheduler"] = self.lr_scheduler.state_dict()
                torch.save(extra, os.path.join(tmp, f"extra_state_rank_{_rank()}.pt"))
            if _rank() == 0:
                self._save_hf_files(tmp)
            if "hf_model" in contents:
                self._save_hf_model(os.path.join(tmp, HF_DIR))
        self._rotate(local_path, max_ckpt_to_keep)

    def _save_hf_model(self, hf_dir: str) -> None:
        """Full weights (LoRA merged) as safetensors next to the config: a ready Hugging Face model folder.
        Collective: every rank gathers, rank 0 writes."""
        full = {name: tensor.cpu() for name, tensor in iter_full_state_dict(self.model)}
        if _rank() == 0:
            from verl.model_merger.base_model_merger import save_hf_model

            save_hf_model(full, hf_dir, hf_dir)
        if dist.is_initialized():
            dist.barrier()

    def _save_hf_files(self, folder: str) -> None:
        base = self.model.get_base_model() if is_peft_model(self.model) else self.model
        hf_dir = os.path.join(folder, HF_DIR)
        config = copy.deepcopy(base.config)
        config.architectures = [_hf_class_name(base)]  # e.g. LlamaForTokenClassification for a critic
        config.save_pretrained(hf_dir)
        if getattr(base, "generation_config", None) is not None and hasattr(base, "can_generate"):
            if base.can_generate():
                base.generation_config.save_pretrained(hf_dir)
        if self.processing_class is not None:
            self.processing_class.save_pretrained(hf_dir)
        meta = {
            "world_size": _world(),
            "role": self.role,
            "architectures": config.architectures,
            "lora_scaling": lora_scaling(self.model) if is_peft_model(self.model) else None,
        }
        with open(os.path.join(folder, META_FILE), "w") as handle:
            json.dump(meta, handle, indent=2)

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
        if dist.is_initialized():
            dist.barrier()

    # ------------------------------------------------------------------ load
    def load_checkpoint(self, local_path: str, hdfs_path: str | None = None, del_local_after_load: bool = False):
        """Restore model, optimizer, scheduler and RNG from ``local_path`` (collective)."""
        if hdfs_path is not None:
            raise NotImplementedError("hdfs_path is not supported; load from a local folder")
        if local_path is None:
            return
        contents = self._contents("load_contents")
        model_optim = os.path.join(local_path, MODEL_OPTIM_DIR)
        state = self._state(contents)
        if state:
            if not os.path.isdir(model_optim):
                raise FileNotFoundError(f"{model_optim} is missing: {local_path} is not a complete FSDP checkpoint")
            dcp.load(state, checkpoint_id=model_optim)
            with_optimizer = "optim" in state
            set_state_dict(
                self.model,
                self.optimizer if with_optimizer else [],
                model_state_dict=state.get("model", {}),
                optim_state_dict=state.get("optim", {}),
            )
        extra_path = os.path.join(local_path, f"extra_state_rank_{_rank()}.pt")
        if "extra" in contents and os.path.exists(extra_path):
            extra = torch.load(extra_path, weights_only=False)
            set_rng_state(extra["rng"])
            if self.lr_scheduler is not None and "lr_scheduler" in extra:
                self.lr_scheduler.load_state_dict(extra["lr_scheduler"])
        if dist.is_initialized():
            dist.barrier()
        if del_local_after_load and _rank() == 0:
            shutil.rmtree(local_path, ignore_errors=True)

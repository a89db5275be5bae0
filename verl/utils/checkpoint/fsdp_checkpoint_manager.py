"""Checkpoints of an FSDP2 engine through ``torch.distributed.checkpoint`` (DCP).

Layout of ``local_path`` (e.g. ``.../global_step_N/actor``)::

    model_optim/            DCP folder: sharded model + optimizer state (reshardable to another world size)
    extra_state_rank_{r}.pt lr scheduler state and RNG states of rank r
    fsdp_config.json        world size, role, LoRA scaling (read by the model merger)
    huggingface/            HF config, generation config and tokenizer (for export)

The folder is written atomically (see ``atomic_dir``); the save / load frame, the extra state and the rotation of
old folders are :class:`~verl.utils.checkpoint.checkpoint_manager.BaseCheckpointManager`'s. The trainer's tracker file
(``latest_checkpointed_iteration.txt``) is written by the trainer after every role has saved.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from verl.utils.checkpoint.checkpoint_manager import HF_DIR, BaseCheckpointManager, _world
from verl.workers.config.roles import CheckpointConfig
from verl.workers.engine.fsdp.weights import is_peft_model, iter_full_state_dict, lora_scaling

MODEL_OPTIM_DIR = "model_optim"
META_FILE = "fsdp_config.json"


def _hf_class_name(module: nn.Module) -> str:
    """Name of the Hugging Face class behind ``module`` (FSDP2 swaps in a subclass named ``FSDP<cls>``)."""
    for cls in type(module).__mro__:
        if cls.__module__.startswith("transformers."):
            return cls.__name__
    return type(module).__name__


class FSDPCheckpointManager(BaseCheckpointManager):
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
        super().__init__(optimizer, lr_scheduler, processing_class, checkpoint_config, role)
        self.model = model

    def _state(self, contents: set[str]) -> dict:
        with_optimizer = self.optimizer is not None and "optimizer" in contents
        model_state, optim_state = get_state_dict(self.model, self.optimizer if with_optimizer else [])
        state = {"model": model_state} if "model" in contents else {}
        if with_optimizer:
            state["optim"] = optim_state
        return state

    def _save_sharded_state(self, folder: str, contents: set[str]) -> None:
        state = self._state(contents)
        if state:
            dcp.save(state, checkpoint_id=os.path.join(folder, MODEL_OPTIM_DIR))

    def _iter_full_state_dict(self) -> Iterator[tuple[str, torch.Tensor]]:
        return iter_full_state_dict(self.model)

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

    def _load_sharded_state(self, local_path: str, contents: set[str]) -> None:
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

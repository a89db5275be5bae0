"""Merge an FSDP checkpoint (DCP shards written by ``FSDPCheckpointManager``) into one Hugging Face model.

Runs in a single process without torch.distributed: DCP reads every shard and reassembles full tensors.
LoRA checkpoints are merged (``W = W_base + alpha / r * B @ A``) and saved under the base model's names.
"""

from __future__ import annotations

import json
import os

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from verl.model_merger.base_model_merger import ModelMergerConfig, register_model_merger, save_hf_model
from verl.utils.checkpoint.fsdp_checkpoint_manager import META_FILE, MODEL_OPTIM_DIR
from verl.workers.engine.fsdp.weights import iter_merged_lora

MODEL_PREFIX = "model."


def load_full_model_state(checkpoint_dir: str) -> dict[str, torch.Tensor]:
    """Full model tensors (no optimizer state) from the DCP folder, keyed by module FQN."""
    reader = FileSystemReader(checkpoint_dir)
    metadata = reader.read_metadata()
    state: dict[str, torch.Tensor] = {}
    for key, item in metadata.state_dict_metadata.items():
        if key.startswith(MODEL_PREFIX) and isinstance(item, TensorStorageMetadata):
            state[key] = torch.empty(item.size, dtype=item.properties.dtype)
    if not state:
        raise ValueError(f"{checkpoint_dir} holds no model tensors (keys start with {MODEL_PREFIX!r})")
    dcp.load(state, storage_reader=reader, no_dist=True)
    return {key[len(MODEL_PREFIX) :]: tensor for key, tensor in state.items()}


@register_model_merger("fsdp")
class FSDPModelMerger:
    def __init__(self, config: ModelMergerConfig):
        self.config = config

    def merged_state_dict(self) -> dict[str, torch.Tensor]:
        local_dir = self.config.local_dir
        model_optim = os.path.join(local_dir, MODEL_OPTIM_DIR)
        if not os.path.isdir(model_optim):
            raise FileNotFoundError(f"{model_optim} is missing: --local_dir must be an FSDP checkpoint folder")
        with open(os.path.join(local_dir, META_FILE)) as handle:
            meta = json.load(handle)
        state = load_full_model_state(model_optim)
        if meta.get("lora_scaling"):
            return dict(iter_merged_lora(state, meta["lora_scaling"]))
        return state

    def merge_and_save(self) -> None:
        state = self.merged_state_dict()
        save_hf_model(state, self.config.hf_model_path, self.config.target_dir, self.config.trust_remote_code)

"""Merge a Megatron checkpoint (written by ``MegatronCheckpointManager``) into one Hugging Face model.

The checkpoint already stores Hugging Face tensors, sharded over the ranks that wrote them, so merging is a
single-process DCP read of every ``model.*`` tensor (whatever tensor/pipeline layout wrote it) and a write of the
Hugging Face folder. Runs without torch.distributed and without megatron-core.
"""

from __future__ import annotations

import json
import os

import torch

from verl.model_merger.base_model_merger import ModelMergerConfig, register_model_merger, save_hf_model
from verl.model_merger.fsdp_model_merger import load_full_model_state
from verl.utils.checkpoint.megatron_checkpoint_manager import DIST_CKPT_DIR, META_FILE


@register_model_merger("megatron")
class MegatronModelMerger:
    def __init__(self, config: ModelMergerConfig):
        self.config = config

    def merged_state_dict(self) -> dict[str, torch.Tensor]:
        local_dir = self.config.local_dir
        folder = os.path.join(local_dir, DIST_CKPT_DIR)
        if not os.path.isdir(folder) or not os.path.exists(os.path.join(local_dir, META_FILE)):
            raise FileNotFoundError(
                f"{folder} or {META_FILE} is missing: --local_dir must be a megatron checkpoint folder "
                "(e.g. .../global_step_N/actor)"
            )
        with open(os.path.join(local_dir, META_FILE)) as handle:
            meta = json.load(handle)
        if meta.get("backend") != "megatron":
            raise ValueError(f"{local_dir} was not written by the megatron engine ({META_FILE}: {meta})")
        return load_full_model_state(folder)

    def merge_and_save(self) -> None:
        state = self.merged_state_dict()
        save_hf_model(state, self.config.hf_model_path, self.config.target_dir, self.config.trust_remote_code)

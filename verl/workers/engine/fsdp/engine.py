"""FSDP2 training engine: one HF module sharded with ``fully_shard``, its optimizer and LR schedule.

Usable alone (tests drive it directly) and held by the actor, critic and reference roles. The engine knows
nothing about PPO: it builds, shards, runs an optimizer step with clipping, offloads, and exports weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from verl.utils.device import current_device, is_cuda_available
from verl.workers.engine.fsdp import sharding
from verl.workers.engine.fsdp.activation_offload import ActivationOffload
from verl.workers.engine.fsdp.model_builder import ModelSettings, build_module
from verl.workers.engine.fsdp.optim import (
    OptimSettings,
    build_lr_scheduler,
    build_optimizer,
    clip_grad_norm_and_step,
)
from verl.workers.engine.fsdp.weights import iter_full_state_dict


@dataclass
class EngineSettings:
    """What the engine reads from ``FSDPEngineConfig`` (verl's field names)."""

    param_offload: bool = False
    optimizer_offload: bool = False
    model_dtype: str = "fp32"
    mixed_precision: dict | None = None
    fsdp_size: int = -1
    reshard_after_forward: bool = True
    use_torch_compile: bool = False

    @classmethod
    def from_config(cls, engine_config, role: str) -> EngineSettings:
        if isinstance(engine_config, EngineSettings):
            return engine_config
        values = {}
        for name in cls.__dataclass_fields__:
            value = getattr(engine_config, name, None) if engine_config is not None else None
            if value is not None:
                values[name] = value
        if values.get("mixed_precision") is not None:  # {"param_dtype", "reduce_dtype", "buffer_dtype"}
            values["mixed_precision"] = dict(values["mixed_precision"])
        if "model_dtype" not in values:
            # verl's defaults: fp32 master weights for trained models, bf16 for the frozen reference on GPU
            values["model_dtype"] = "bf16" if (role == "ref" and is_cuda_available()) else "fp32"
        return cls(**values)


def compile_decoder_layers(module: nn.Module) -> None:
    """``torch.compile`` each decoder layer's forward in place (regional compilation, as torchtitan does): the
    layers share one compiled graph, FSDP2's hooks around them stay eager, and parameter names do not change."""
    layer_classes = sharding.decoder_layer_classes(module)
    for sub in module.modules():
        if isinstance(sub, layer_classes):
            sub.forward = torch.compile(sub.forward)


def _require_distributed() -> None:
    if not dist.is_initialized():
        raise RuntimeError(
            "FSDPEngine needs torch.distributed initialised (torchrun, or dist.init_process_group with "
            "backend=verl.utils.device.get_nccl_backend())"
        )


class FSDPEngine:
    """Holds ``module`` (FSDP2-sharded HF model), ``optimizer`` and ``lr_scheduler`` for one role."""

    def __init__(
        self,
        model_config,
        engine_config=None,
        optim_config=None,
        role: str = "actor",
        device_mesh=None,
        use_torch_compile: bool | None = None,
    ):
        _require_distributed()
        self.role = role
        self.model_settings = ModelSettings.from_config(model_config)
        self.settings = EngineSettings.from_config(engine_config, role)
        if use_torch_compile is not None:
            self.settings.use_torch_compile = use_torch_compile
        self.optim_settings = OptimSettings.from_config(optim_config) if role != "ref" else None
        self.device_mesh = device_mesh or sharding.create_device_mesh(dist.get_world_size(), self.settings.fsdp_size)
        self.module: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.lr_scheduler = None
        self._forward_module: nn.Module | None = None
        self.activation_offload: ActivationOffload | None = None

    # ------------------------------------------------------------------ set-up
    def initialize(self) -> FSDPEngine:
        """Load the pretrained weights, shard them, and build optimizer + schedule (not for ``ref``)."""
        dtype = sharding.to_dtype(self.settings.model_dtype)
        module = build_module(self.model_settings, self.role, dtype)
        sharding.cast_buffers(module, self.settings.mixed_precision)
        if is_cuda_available():
            module = module.to(current_device())
        if self.settings.use_torch_compile:
            compile_decoder_layers(module)
        mp_policy = sharding.mixed_precision_policy(self.settings.mixed_precision, self.settings.model_dtype)
        self.module = sharding.apply_fsdp2(
            module, self.device_mesh, mp_policy, self.settings.param_offload, self.settings.reshard_after_forward
        )
        if self.model_settings.enable_activation_offload and self.role != "ref":
            self.activation_offload = ActivationOffload(self.module)
        self._forward_module = self.module
        if self.optim_settings is not None:
            self.optimizer = build_optimizer(self.module, self.optim_settings)
            self.lr_scheduler = build_lr_scheduler(self.optimizer, self.optim_settings)
            if self.settings.optimizer_offload:
                sharding.offload_optimizer(self.optimizer)
        return self

    @property
    def forward_module(self) -> nn.Module:
        """The module to call for forward passes (its decoder layers compiled when ``use_torch_compile``)."""
        return self._forward_module

    @property
    def dp_size(self) -> int:
        return self.device_mesh.size()

    @property
    def dp_rank(self) -> int:
        return dist.get_rank() if self.device_mesh.ndim == 1 else self.device_mesh.get_rank()

    @property
    def is_lora(self) -> bool:
        return self.model_settings.lora_rank > 0

    # ------------------------------------------------------------------ training
    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of a loss already normalised by global counts (its sum over all ranks and micro-batches is
        the whole-batch loss). FSDP averages gradients over ranks, so the loss is scaled by the data-parallel
        size to turn that average back into the sum."""
        (loss * self.dp_size).backward()

    def clip_and_step(self) -> float:
        """Clip to ``optim.clip_grad`` and step (skipped on a non-finite norm); returns the pre-clip norm."""
        self.load_optimizer()
        grad_norm = clip_grad_norm_and_step(self.module, self.optimizer, self.optim_settings.clip_grad)
        self.offload_optimizer()
        return grad_norm

    def offload_optimizer(self) -> None:
        """Move optimizer state to the CPU when ``optimizer_offload`` is set (between updates)."""
        if self.settings.optimizer_offload and self.optimizer is not None:
            sharding.offload_optimizer(self.optimizer)

    def load_optimizer(self) -> None:
        """Bring optimizer state back to the compute device before an update (``optimizer_offload``)."""
        if self.settings.optimizer_offload and self.optimizer is not None:
            sharding.load_optimizer(self.optimizer, current_device())

    def lr_scheduler_step(self) -> float:
        """Advance the schedule one training step; returns the lr that was used for this step."""
        lr = self.get_lr()
        self.lr_scheduler.step()
        return lr

    def get_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def train_mode(self) -> None:
        self.module.train()

    def eval_mode(self) -> None:
        self.module.eval()

    # ------------------------------------------------------------------ weights
    def iter_full_state_dict(self, bucket_bytes: int = 256 << 20, dtype=None, device=None) -> Iterator:
        """Full HF-named tensors, LoRA merged (a collective: every rank must consume the iterator)."""
        return iter_full_state_dict(self.module, bucket_bytes=bucket_bytes, dtype=dtype, device=device)

    def hf_config(self):
        module = self.module
        base = module.get_base_model() if hasattr(module, "get_base_model") else module
        return base.config

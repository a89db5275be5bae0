"""FSDP2 training engine: one HF module sharded with ``fully_shard``, its optimizer and LR schedule.

Usable alone (tests drive it directly) and held by the actor, critic and reference roles. The engine knows
nothing about PPO: it builds, shards, runs an optimizer step with clipping, offloads, and exports weights.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn

from verl.utils.device import current_device, is_cuda_available
from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
from verl.workers.engine.fsdp import sharding
from verl.workers.engine.fsdp.activation_offload import ActivationOffload
from verl.workers.engine.fsdp.model_builder import build_module, is_vision_language, load_hf_config, vision_tower
from verl.workers.engine.fsdp.optim import build_lr_scheduler, build_optimizer, clip_grad_norm_and_step
from verl.workers.engine.fsdp.ulysses import UlyssesMesh, create_ulysses_mesh
from verl.workers.engine.fsdp.ulysses_attention import check_hf_config_heads, use_ulysses_attention
from verl.workers.engine.fsdp.weights import iter_full_state_dict
from verl.workers.engine.registry import register_engine

CUDA_COMPILE_OPTIONS = {"triton.prefer_nd_tiling": True}
"""Inductor options of the compiled decoder layers on CUDA. nd tiling gives the element-wise kernels (RoPE, SwiGLU,
norms) tiled index math over the dynamic token dimension; exact (the same arithmetic). Measured on one H200
(``benchmarks/gpu/calls.sh keep15`` to ``keep15u``, session 32, variants in the same call): alone within the
steps' spread (-3% to +4% on the update); with ``fsdp_config.reshard_after_forward=False`` faster in each of five
pairs (3-15%; SmolLM2's update 0.248-0.262 s a step against 0.265-0.329 s). Not on CPU, whose inductor backend has
no Triton kernels."""


def compile_decoder_layers(module: nn.Module, device_type: str | None = None) -> None:
    """``torch.compile`` each decoder layer's forward in place (regional compilation, as torchtitan does): the
    layers share one compiled graph, FSDP2's hooks around them stay eager, and parameter names do not change.

    Compiled with dynamic shapes from the start: packed micro-batches change their token count every call, and a
    static first graph would be thrown away and recompiled on the second shape (measured on an H100: 3-5 s more
    in the second GRPO step). ``device_type`` (default: that of the module's first parameter) picks
    ``CUDA_COMPILE_OPTIONS`` on ``"cuda"``."""
    if device_type is None:
        first = next(module.parameters(), None)
        device_type = first.device.type if first is not None else "cpu"
    options = CUDA_COMPILE_OPTIONS if device_type == "cuda" else None
    layer_classes = sharding.decoder_layer_classes(module)
    for sub in module.modules():
        if isinstance(sub, layer_classes):
            sub.forward = torch.compile(sub.forward, dynamic=True, options=options)


def _require_distributed() -> None:
    if not dist.is_initialized():
        raise RuntimeError(
            "FSDPEngine needs torch.distributed initialised (torchrun, or dist.init_process_group with "
            "backend=verl.utils.device.get_nccl_backend())"
        )


@register_engine("fsdp")
@register_engine("fsdp2")
class FSDPEngine:
    """Holds ``module`` (FSDP2-sharded HF model), ``optimizer`` and ``lr_scheduler`` for one role.

    ``optim_config`` is ignored for the frozen ``ref`` role (no optimizer); ``use_torch_compile`` compiles the
    forward module (the role's ``use_torch_compile`` key). ``ulysses_sequence_parallel_size > 1`` splits each
    packed micro-batch over groups of that many ranks (``ulysses``: the ``(dp, sp)`` mesh the forward functions
    and data dispatch use; a caller that needs it before the engine passes its own as ``ulysses_mesh``);
    parameters stay sharded over every rank.
    """

    def __init__(
        self,
        model_config: HFModelConfig,
        engine_config: FSDPEngineConfig,
        optim_config: OptimConfig | None = None,
        role: str = "actor",
        device_mesh=None,
        use_torch_compile: bool = False,
        freeze_vision_tower: bool = False,
        ulysses_sequence_parallel_size: int = 1,
        ulysses_mesh: UlyssesMesh | None = None,
    ):
        _require_distributed()
        self.role = role
        self.model_config = model_config
        self.config = engine_config
        self.use_torch_compile = use_torch_compile
        self.freeze_vision_tower = freeze_vision_tower
        self.optim_config = optim_config if role != "ref" else None
        self.device_mesh = device_mesh or sharding.create_device_mesh(dist.get_world_size(), engine_config.fsdp_size)
        self.ulysses: UlyssesMesh = ulysses_mesh or create_ulysses_mesh(int(ulysses_sequence_parallel_size))
        self.module: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.lr_scheduler = None
        self._forward_module: nn.Module | None = None
        self.activation_offload: ActivationOffload | None = None

    # ------------------------------------------------------------------ set-up
    def initialize(self) -> FSDPEngine:
        """Load the pretrained weights, shard them, and build optimizer + schedule (not for ``ref``)."""
        dtype = sharding.to_dtype(self.config.model_dtype)
        if self.ulysses.enabled:  # before any weights load
            self._check_sequence_parallel()
        module = build_module(self.model_config, self.role, dtype)
        sharding.cast_buffers(module, self.config.mixed_precision)
        if self.ulysses.enabled:
            use_ulysses_attention(module)
        if self.freeze_vision_tower:
            tower = vision_tower(module)
            if tower is None:
                raise ValueError(f"freeze_vision_tower is set but {self.model_config.path} has no vision tower")
            tower.requires_grad_(False)
        if is_cuda_available():
            module = module.to(current_device())
        if self.use_torch_compile:
            compile_decoder_layers(module)
        mp_policy = sharding.mixed_precision_policy(self.config.mixed_precision, self.config.model_dtype)
        self.module = sharding.apply_fsdp2(module, self.device_mesh, mp_policy, self.config)
        # training roles only (an optimizer); a frozen reward model's config has no such key
        if self.optim_config is not None and self.model_config.enable_activation_offload:
            self.activation_offload = ActivationOffload(self.module)
        self._forward_module = self.module
        if self.optim_config is not None:
            self.optimizer = build_optimizer(self.module, self.optim_config)
            self.lr_scheduler = build_lr_scheduler(self.optimizer, self.optim_config)
            if self.config.optimizer_offload:
                sharding.offload_optimizer(self.optimizer)
        return self

    def _check_sequence_parallel(self) -> None:
        hf_config = load_hf_config(self.model_config)
        if is_vision_language(hf_config):
            raise ValueError(
                f"{self.model_config.path} is a vision-language model: Ulysses sequence parallelism is not supported "
                "for it (image features are merged by token position); set ulysses_sequence_parallel_size=1"
            )
        check_hf_config_heads(hf_config, self.ulysses.sp_size)

    @property
    def forward_module(self) -> nn.Module:
        """The module to call for forward passes (its decoder layers compiled when ``use_torch_compile``)."""
        return self._forward_module

    @property
    def dp_size(self) -> int:
        """Data-parallel size: ranks holding different rows (the world divided by the sequence-parallel size)."""
        return self.ulysses.dp_size

    @property
    def dp_rank(self) -> int:
        return self.ulysses.dp_rank

    @property
    def world_size(self) -> int:
        """Ranks the parameters are sharded over (FSDP averages gradients over all of them)."""
        return self.device_mesh.size()

    @property
    def is_lora(self) -> bool:
        return self.model_config.lora_rank > 0

    # ------------------------------------------------------------------ training
    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of a loss already normalised by global counts (its sum over all ranks and micro-batches is
        the whole-batch loss). FSDP averages gradients over all ranks, so the loss is scaled by their number to
        turn that average back into the sum (sequence-parallel peers each hold one slice of the same loss's
        gradient: their sum is that gradient once)."""
        (loss * self.world_size).backward()

    def clip_and_step(self) -> float:
        """Clip to ``optim.clip_grad`` and step (skipped on a non-finite norm); returns the pre-clip norm."""
        self.load_optimizer()
        grad_norm = clip_grad_norm_and_step(self.module, self.optimizer, self.optim_config.clip_grad)
        self.offload_optimizer()
        return grad_norm

    def offload_optimizer(self) -> None:
        """Move optimizer state to the CPU when ``optimizer_offload`` is set (between updates)."""
        if self.config.optimizer_offload and self.optimizer is not None:
            sharding.offload_optimizer(self.optimizer)

    def load_optimizer(self) -> None:
        """Bring optimizer state back to the compute device before an update (``optimizer_offload``)."""
        if self.config.optimizer_offload and self.optimizer is not None:
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

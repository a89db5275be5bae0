"""Apply FSDP2 (``fully_shard``) to a Hugging Face module: per-decoder-layer units plus the root.

Mixed precision (``fsdp_config.mixed_precision``, verl's keys ``param_dtype``/``reduce_dtype``/``buffer_dtype``):
parameters stay in ``model_dtype`` (fp32 master weights by default) and are all-gathered in ``param_dtype`` for
compute, gradients are reduce-scattered in ``reduce_dtype``, buffers kept in ``buffer_dtype``. The policy applies
on GPU (verl's bf16/fp32 by default) and on CPU only with ``mixed_precision.on_cpu`` (CPUs without native bf16 run
fp32 faster). Parameter offload uses ``CPUOffloadPolicy`` (sharded parameters,
gradients and the optimizer step live on the CPU).
"""

from __future__ import annotations

import functools
import logging
from collections import Counter

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard

from verl.utils.device import NATIVE_BF16_FLAGS, cpu_multiplies_bf16, get_device_name, is_cuda_available
from verl.workers.config.engine import FSDPEngineConfig, MixedPrecisionConfig, WrapPolicyConfig

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
DTYPES |= {"fp32": torch.float32, "float32": torch.float32}


def to_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}")
    return DTYPES[name]


def create_device_mesh(world_size: int, fsdp_size: int = -1) -> DeviceMesh:
    """1-D ``("fsdp",)`` mesh, or a 2-D ``("ddp", "fsdp")`` hybrid-shard mesh when ``0 < fsdp_size < world``."""
    device = get_device_name()
    if fsdp_size <= 0 or fsdp_size >= world_size:
        return init_device_mesh(device, (world_size,), mesh_dim_names=("fsdp",))
    if world_size % fsdp_size:
        raise ValueError(f"fsdp_size={fsdp_size} must divide the world size {world_size}")
    return init_device_mesh(device, (world_size // fsdp_size, fsdp_size), mesh_dim_names=("ddp", "fsdp"))


def mixed_precision_policy(
    config: MixedPrecisionConfig | None, model_dtype: str = "fp32"
) -> MixedPrecisionPolicy | None:
    """FSDP2's policy for ``fsdp_config.mixed_precision`` (bf16 compute / fp32 reduce by default) on GPU, and on
    CPU when ``on_cpu`` is set; ``None`` when the config is null, on CPU without ``on_cpu``, or when it would cast
    nothing (compute and reduce in ``model_dtype``)."""
    if config is None or not (is_cuda_available() or config.on_cpu):
        return None
    param_dtype, reduce_dtype = to_dtype(config.param_dtype), to_dtype(config.reduce_dtype)
    if param_dtype == reduce_dtype == to_dtype(model_dtype):
        return None
    if not is_cuda_available() and param_dtype == torch.bfloat16 and cpu_multiplies_bf16() is False:
        warn_emulated_bf16()
    return MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype, cast_forward_inputs=True)


@functools.cache  # once a process
def warn_emulated_bf16() -> None:
    """``mixed_precision.on_cpu`` computes in bf16 on a CPU that emulates it: say so and name the fix."""
    logging.getLogger(__name__).warning(
        "fsdp_config.mixed_precision.on_cpu=True computes in bf16, but this CPU has no native bf16 (no %s flag in "
        "/proc/cpuinfo): every matmul is emulated, many times slower than fp32 (session 34 on a 2-core AVX2 EPYC: "
        "516 s for SmolLM2's first update, against 25 s a whole step in fp32). Set "
        "actor_rollout_ref.actor.fsdp_config.mixed_precision.on_cpu=False (and the ref's / critic's) to train in "
        "the model's dtype here.",
        "/".join(sorted(NATIVE_BF16_FLAGS)),
    )


def cast_buffers(module: nn.Module, config: MixedPrecisionConfig | None) -> None:
    """Floating-point buffers (e.g. rotary frequencies) to ``mixed_precision.buffer_dtype`` (verl: fp32)."""
    dtype = to_dtype(config.buffer_dtype if config is not None else "fp32")
    for sub in module.modules():
        for name, buffer in list(sub.named_buffers(recurse=False)):
            if buffer is not None and buffer.is_floating_point() and buffer.dtype != dtype:
                setattr(sub, name, buffer.to(dtype))


def decoder_layer_classes(module: nn.Module, names: list[str] | None = None) -> tuple[type, ...]:
    """Classes of ``module``'s submodules named in ``names`` (default: the HF model's ``_no_split_modules``, its
    transformer blocks)."""
    if names is None:
        names = sorted({name for sub in module.modules() for name in (getattr(sub, "_no_split_modules", None) or [])})
    classes = {type(sub) for sub in module.modules() if type(sub).__name__ in set(names)}
    if not classes:
        raise ValueError(
            f"no submodule of {type(module).__name__} has a class in {names}; set "
            "fsdp_config.wrap_policy.transformer_layer_cls_to_wrap to the model's decoder layer class"
        )
    return tuple(classes)


def sharding_units(module: nn.Module, wrap_policy: WrapPolicyConfig) -> list[nn.Module]:
    """Submodules sharded as their own FSDP2 units, in module order: every layer of the wrap policy's classes, plus
    (``min_num_params > 0``) each innermost other submodule outside those layers holding at least that many
    parameters no unit holds yet; no layers for an empty ``transformer_layer_cls_to_wrap``. Units are disjoint; a
    module sharing a parameter with a module outside it (``embed_tokens`` tied to ``lm_head``) stays with the root."""
    names = wrap_policy.transformer_layer_cls_to_wrap
    layer_classes = decoder_layer_classes(module, names) if names != [] else ()
    layers = [sub for sub in module.modules() if isinstance(sub, layer_classes)]
    claimed = {id(p) for layer in layers for p in layer.parameters()}
    uses = Counter(id(p) for _, p in module.named_parameters(remove_duplicate=False))
    extra: list[nn.Module] = []

    def visit(sub: nn.Module) -> None:
        if isinstance(sub, layer_classes):
            return
        for child in sub.children():
            visit(child)
        if sub is module or wrap_policy.min_num_params <= 0:
            return
        params = {id(p): p.numel() for p in sub.parameters()}
        inner_uses = Counter(id(p) for _, p in sub.named_parameters(remove_duplicate=False))
        tied_outside = any(inner_uses[pid] < uses[pid] for pid in params)
        free = sum(n for pid, n in params.items() if pid not in claimed)
        if free >= wrap_policy.min_num_params and not tied_outside and not claimed & params.keys():
            extra.append(sub)
            claimed.update(params)

    visit(module)
    chosen = {id(unit) for unit in layers + extra}
    return [sub for sub in module.modules() if id(sub) in chosen]


def apply_fsdp2(
    module: nn.Module, mesh: DeviceMesh, mp_policy: MixedPrecisionPolicy | None, config: FSDPEngineConfig
) -> nn.Module:
    """``fully_shard`` every unit of ``config.wrap_policy``, then the whole module (CPU offload with
    ``offload_policy``/``param_offload`` on GPU, forward prefetch of the next unit with ``forward_prefetch``).
    Returns the (same, now FSDP) module."""
    kwargs: dict = {"mesh": mesh, "reshard_after_forward": config.reshard_after_forward}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    cpu_offload = (config.param_offload or config.offload_policy) and is_cuda_available()
    kwargs["offload_policy"] = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    units = sharding_units(module, config.wrap_policy)
    for unit in units:
        fully_shard(unit, **kwargs)
    fully_shard(module, **kwargs)
    if config.forward_prefetch:
        for unit, following in zip(units, units[1:]):
            unit.set_modules_to_forward_prefetch([following])
    return module


def fsdp_modules(module: nn.Module) -> list[nn.Module]:
    """The FSDP2-sharded modules inside ``module`` (none for a plain module)."""
    return [sub for sub in module.modules() if isinstance(sub, FSDPModule)]


def param_groups(unit: nn.Module) -> list:
    """The FSDP2 parameter groups of ``unit`` (an FSDP module): FSDP2's state moved from one group to a list of them
    across torch versions; both layouts are read."""
    state = unit._get_fsdp_state()
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        single = getattr(state, "_fsdp_param_group", None)
        groups = [single] if single is not None else []
    return list(groups)


def offload_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Move every optimizer state tensor to the CPU (frees accelerator memory between updates)."""
    _move_optimizer(optimizer, torch.device("cpu"))


def load_optimizer(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move optimizer state back to ``device`` before ``step``."""
    _move_optimizer(optimizer, device)


def _move_optimizer(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.device != device:
                state[key] = value.to(device, non_blocking=True)

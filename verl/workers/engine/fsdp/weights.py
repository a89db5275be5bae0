"""Gather full (unsharded) weights of an FSDP2 module in Hugging Face naming, LoRA merged.

Used for weight sync into the rollout engine and for Hugging Face export. Every rank must call
:func:`iter_full_state_dict` and consume the iterator to the end: each sharded tensor is gathered with a
collective (a bucket of FSDP2 shards at a time, :mod:`verl.workers.engine.fsdp.full_gather`), so ranks must walk
the parameters in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from verl.utils.weight_buckets import in_buckets
from verl.workers.engine.fsdp.full_gather import iter_full_tensors

PEFT_PREFIX = "base_model.model."
LORA_BASE_INFIX = ".base_layer"


def is_peft_model(module: nn.Module) -> bool:
    """True for a ``peft.PeftModel`` (possibly FSDP-wrapped, which keeps the class name with an FSDP prefix)."""
    return hasattr(module, "peft_config") and hasattr(module, "base_model")


def lora_scaling(module: nn.Module) -> dict[str, float]:
    """``{module path (HF naming) -> alpha / r}`` for every LoRA layer of a peft model (default adapter)."""
    scaling: dict[str, float] = {}
    for name, sub in module.named_modules():
        if hasattr(sub, "scaling") and isinstance(sub.scaling, dict) and hasattr(sub, "lora_A"):
            adapter = next(iter(sub.scaling))
            scaling[_hf_name(name)] = float(sub.scaling[adapter])
    return scaling


def _hf_name(peft_name: str) -> str:
    """Strip peft's ``base_model.model.`` prefix and ``.base_layer`` infix to get the HF parameter name."""
    name = peft_name[len(PEFT_PREFIX) :] if peft_name.startswith(PEFT_PREFIX) else peft_name
    return name.replace(LORA_BASE_INFIX, "")


def iter_full_state_dict(
    module: nn.Module,
    bucket_bytes: int = 256 << 20,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(hf_name, full_tensor)`` for every entry of ``module.state_dict()``.

    Tensors are gathered a bucket at a time (about ``bucket_bytes`` of full tensors, one collective for FSDP2's
    shards) and then yielded, so peak extra memory is about one bucket. For a peft LoRA model the adapters are merged:
    ``W = W_base + scaling * B @ A`` with ``scaling = lora_alpha / r``, and only base names are yielded.
    ``dtype``/``device`` optionally cast and move each yielded tensor (e.g. bf16 on the rollout's GPU).
    """
    state = module.state_dict()
    if is_peft_model(module):  # the merge runs in float32 and casts afterwards
        yield from iter_merged_lora(state, lora_scaling(module), bucket_bytes, dtype, device)
        return
    yield from in_buckets(iter_full_tensors(state.items(), bucket_bytes, dtype), bucket_bytes, dtype, device)


def iter_merged_lora(
    state: dict[str, torch.Tensor],
    scaling: dict[str, float],
    bucket_bytes: int = 256 << 20,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Merge LoRA factors of a peft state dict into their base weights (also used offline by the merger).

    Keys look like ``base_model.model.X.q_proj.base_layer.weight``, ``...q_proj.lora_A.default.weight``,
    ``...lora_B...``; ``scaling`` maps the HF layer path ``X.q_proj`` to ``lora_alpha / r``."""
    lora_a: dict[str, torch.Tensor] = {}
    lora_b: dict[str, torch.Tensor] = {}
    pending_base: dict[str, torch.Tensor] = {}

    def merged_pairs():
        for key, full in iter_full_tensors(state.items(), bucket_bytes):  # collectives: every rank walks all keys
            if ".lora_A." in key or ".lora_B." in key:
                layer = _hf_name(key.split(".lora_")[0])
                (lora_a if ".lora_A." in key else lora_b)[layer] = full
            elif ".lora_" in key or "lora_embedding" in key or "lora_magnitude" in key:
                raise NotImplementedError(f"unsupported LoRA tensor {key!r}: only lora_A/lora_B adapters merge")
            elif LORA_BASE_INFIX + "." in key:
                layer = _hf_name(key.split(LORA_BASE_INFIX)[0])
                pending_base[layer + "." + key.rsplit(".", 1)[1]] = full
            else:
                yield _hf_name(key), full
                continue
            # emit every base weight whose two factors have arrived
            for base_name in [n for n in pending_base if n.rsplit(".", 1)[0] in lora_a]:
                layer = base_name.rsplit(".", 1)[0]
                if base_name.endswith(".weight") and layer in lora_b:
                    base = pending_base.pop(base_name)
                    delta = (lora_b[layer].float() @ lora_a[layer].float()) * scaling[layer]
                    yield base_name, (base.float() + delta).to(base.dtype)
                elif not base_name.endswith(".weight"):
                    yield base_name, pending_base.pop(base_name)
        if pending_base:
            raise RuntimeError(f"LoRA merge left base weights without adapters: {sorted(pending_base)[:4]}")

    yield from in_buckets(merged_pairs(), bucket_bytes, dtype, device)

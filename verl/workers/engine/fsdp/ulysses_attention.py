"""Ulysses attention as a Hugging Face attention function, so the model code stays Hugging Face's own.

``register_ulysses_attention("sdpa")`` registers ``"ulysses_sdpa"`` in transformers' ``AttentionInterface``: a
wrapper around the ``sdpa`` function. A model switched to it (``set_attn_implementation``) runs as before until a
forward pass carries ``ulysses=UlyssesAttentionInputs(...)`` in its keyword arguments (Hugging Face passes them
down to every attention call, and gradient checkpointing replays them on recompute). Then, in every layer:

    q, k, v: (b, heads, T / sp, d)  --all-to-all-->  (b, heads / sp, T, d)      this rank's heads, whole sequence
    out = inner_attention(q, k, v)   (b, T, heads / sp, d)                       sequence boundaries of the pack
    out      --all-to-all-->  (b, T / sp, heads, d)                               back to this rank's slice

With fewer KV heads than ranks (``sp % kv_heads == 0``) each KV head is replicated ``sp / kv_heads`` times
before the all-to-all so every rank holds the one KV head its query heads use.

Sequence boundaries of the packed batch: ``sdpa`` gets a block-diagonal causal mask over the whole sequence
(none when the pack holds one sequence: plain causal); every other inner implementation gets the whole sequence's
``position_ids`` and must read the boundaries from them, as transformers' flash-attention functions do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn
from torch.distributed import ProcessGroup

from verl.utils.ulysses import group_size, head_split_error, heads_to_sequence, sequence_to_heads

PREFIX = "ulysses_"
MASK_BASED = ("sdpa",)
"""Inner implementations that take the packed sequences' boundaries as a mask; the rest read ``position_ids``."""

UNSUPPORTED = ("eager", "flex_attention", "paged|eager")
"""Inner implementations the wrapper refuses: ``eager`` wants an additive float mask, flex a ``BlockMask``."""

_active_forwards = 0


def check_hf_config_heads(hf_config, sp_size: int, key: str = "ulysses_sequence_parallel_size") -> None:
    """Fail (naming ``key``) unless ``sp_size`` splits the heads of a Hugging Face config (the text config of a
    multimodal one): :func:`verl.utils.ulysses.head_split_error`."""
    text_config = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    num_heads = text_config.num_attention_heads
    num_kv_heads = getattr(text_config, "num_key_value_heads", None) or num_heads
    error = head_split_error(num_heads, num_kv_heads, sp_size, key)
    if error:
        raise ValueError(error)


def _packed_causal_mask(position_ids: torch.Tensor) -> torch.Tensor:
    """``(1, 1, T, T)`` bool mask: token ``i`` attends to ``j <= i`` of its own sequence. A sequence starts
    wherever ``position_ids (1, T)`` does not continue the previous position (transformers' packing rule)."""
    positions = position_ids[0]
    starts = torch.ones_like(positions, dtype=torch.bool)
    starts[1:] = positions[1:] != positions[:-1] + 1
    sequence = torch.cumsum(starts, dim=0)
    same = sequence[:, None] == sequence[None, :]
    causal = torch.ones_like(same).tril()
    return (same & causal)[None, None]


@dataclass
class UlyssesAttentionInputs:
    """What one sequence-parallel forward pass gives every attention layer (through the model's ``**kwargs``).

    ``position_ids (1, T)``: the whole padded pack (each rank's model only sees its slice ``(1, T / sp)``).
    ``single_sequence``: the real tokens form one sequence (padding after it never reaches them causally), so a
    mask-based inner implementation can run plain causal attention.
    """

    group: ProcessGroup
    position_ids: torch.Tensor
    single_sequence: bool
    _mask: torch.Tensor | None = field(default=None, repr=False)

    def mask(self) -> torch.Tensor | None:
        """The block-diagonal causal mask (built once per forward pass, shared by the layers)."""
        if self.single_sequence:
            return None
        if self._mask is None:
            self._mask = _packed_causal_mask(self.position_ids)
        return self._mask


class _GroupedHeadsView:
    """The attention module as seen by the inner function when KV heads were replicated: same attributes, but
    ``num_key_value_groups`` is this rank's query heads per (replicated) KV head."""

    def __init__(self, module: nn.Module, num_key_value_groups: int):
        self._module = module
        self.num_key_value_groups = num_key_value_groups

    def __getattr__(self, name: str):
        return getattr(self._module, name)


def _ulysses_attention_forward(
    inner_name: str,
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    ulysses: UlyssesAttentionInputs | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """``query (b, heads, T/sp, d)``, ``key``/``value (b, kv_heads, T/sp, d)`` → ``(b, T/sp, heads, d)``."""
    from transformers import AttentionInterface

    inner = AttentionInterface()[inner_name]
    if ulysses is None:  # not a sequence-parallel pass (e.g. generation with the same module)
        return inner(module, query, key, value, attention_mask, **kwargs)
    group = ulysses.group
    sp = group_size(group)
    kv_heads = key.shape[1]
    if kv_heads < sp:  # replicate: rank r then holds KV head r // (sp / kv_heads), the one its query heads use
        key = key.repeat_interleave(sp // kv_heads, dim=1)
        value = value.repeat_interleave(sp // kv_heads, dim=1)
    query = sequence_to_heads(query, seq_dim=2, head_dim=1, group=group)
    key = sequence_to_heads(key, seq_dim=2, head_dim=1, group=group)
    value = sequence_to_heads(value, seq_dim=2, head_dim=1, group=group)
    groups = query.shape[1] // key.shape[1]
    if getattr(module, "num_key_value_groups", groups) != groups:
        module = _GroupedHeadsView(module, groups)
    kwargs["position_ids"] = ulysses.position_ids
    mask = ulysses.mask() if inner_name in MASK_BASED else None
    output, _ = inner(module, query, key, value, mask, **kwargs)  # (b, T, heads / sp, d)
    return heads_to_sequence(output, seq_dim=1, head_dim=2, group=group), None


def _ulysses_mask(inner_name: str, **kwargs):
    """Mask creation of the wrapped implementation, skipped inside a sequence-parallel pass: the model only sees
    its slice there, and the wrapper builds the whole sequence's mask itself."""
    if _active_forwards:
        return None
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    return ALL_MASK_ATTENTION_FUNCTIONS[inner_name](**kwargs)


def register_ulysses_attention(inner_name: str) -> str:
    """Register ``"ulysses_<inner_name>"`` (attention and mask functions) with transformers; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if inner_name.startswith(PREFIX):
        return inner_name
    if inner_name in UNSUPPORTED or inner_name not in AttentionInterface():
        supported = sorted(n for n in AttentionInterface() if n not in UNSUPPORTED and not n.startswith(PREFIX))
        raise ValueError(
            f"Ulysses sequence parallelism cannot wrap attention implementation {inner_name!r}; use one of "
            f"{supported} (model.override_config.attn_implementation)"
        )
    name = PREFIX + inner_name
    AttentionInterface.register(name, partial(_ulysses_attention_forward, inner_name))
    if inner_name in ALL_MASK_ATTENTION_FUNCTIONS:
        AttentionMaskInterface.register(name, partial(_ulysses_mask, inner_name))
    return name


def use_ulysses_attention(module: nn.Module) -> str:
    """Switch a Hugging Face model (or a peft model around one) to the Ulysses wrapper of its current attention
    implementation; returns the new implementation name."""
    base = module.get_base_model() if hasattr(module, "get_base_model") else module
    inner_name = base.config._attn_implementation
    text_config = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
    if inner_name in MASK_BASED and "sliding_attention" in (getattr(text_config, "layer_types", None) or []):
        raise ValueError(
            f"the model has sliding-window attention layers, which the Ulysses {inner_name!r} mask (full causal "
            "attention within each sequence) does not reproduce; use flash_attention_2 "
            "(model.override_config.attn_implementation) or ulysses_sequence_parallel_size=1"
        )
    name = register_ulysses_attention(inner_name)
    base.set_attn_implementation(name)
    if base.config._attn_implementation != name:
        raise RuntimeError(f"{type(base).__name__} does not accept a registered attention function ({name!r})")
    return name


@contextlib.contextmanager
def sequence_parallel_forward() -> Iterator[None]:
    """Mark a model call as sequence parallel (mask creation is then left to the wrapper)."""
    global _active_forwards
    _active_forwards += 1
    try:
        yield
    finally:
        _active_forwards -= 1

"""Model forward for one micro-batch: next-token log-probs / entropy (actor, ref) or values (critic).

All outputs are aligned with the padded input: ``out[b, t]`` belongs to position ``t``; for log-probs it is
``log p(input_ids[b, t + 1] | input_ids[b, :t + 1])`` so the response slice is ``out[:, -R - 1 : -1]``.
Padding positions are 0.
"""

from __future__ import annotations

import torch
from torch import nn

from verl.models.transformers.qwen2_vl import packed_model_position_ids, padded_model_position_ids
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.workers.engine.fsdp.packing import PackedBatch, pack


def _model_kwargs(multi_modal_inputs: dict | None = None) -> dict:
    return {"use_cache": False, **(multi_modal_inputs or {})}


def _packed_positions(packed: PackedBatch) -> torch.Tensor:
    """Model position ids of a packed batch: ``(1, T)``, or ``(4, 1, T)`` for M-RoPE (text row first)."""
    if packed.position_ids.dim() == 3:
        return packed_model_position_ids(packed.position_ids, packed.cu_seqlens)
    return packed.position_ids


def forward_log_probs(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = True,
    multi_modal_inputs: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token ``log_probs (bs, S)`` and optionally ``entropy (bs, S)`` of the tempered distribution.

    ``multi_modal_inputs`` (``pixel_values``, ``image_grid_thw``, ... of the micro-batch's rows, concatenated in
    row order) go to the model as keyword arguments; ``position_ids`` may be M-RoPE ``(bs, 3, S)``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        logits = module(
            input_ids=packed.input_ids, position_ids=_packed_positions(packed), **_model_kwargs(multi_modal_inputs)
        ).logits
        logits = logits[0].float() / temperature  # (T, V)
        log_probs = packed.unpack(logprobs_from_logits(logits, packed.next_token_labels()))
        entropy = packed.unpack(entropy_from_logits(logits)) if calculate_entropy else None
        return log_probs, entropy
    logits = module(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=padded_model_position_ids(position_ids),
        **_model_kwargs(multi_modal_inputs),
    ).logits
    logits = logits.float() / temperature  # (bs, S, V)
    labels = torch.roll(input_ids, shifts=-1, dims=1)
    valid = attention_mask.bool()  # where(), not *: fully masked rows may hold NaN
    log_probs = torch.where(valid, logprobs_from_logits(logits, labels), 0.0)
    entropy = torch.where(valid, entropy_from_logits(logits), 0.0) if calculate_entropy else None
    return log_probs, entropy


def forward_values(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    use_remove_padding: bool = True,
) -> torch.Tensor:
    """Scalar ``values (bs, S)`` from a value model whose output ``logits`` are ``(..., 1)``."""
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        values = module(input_ids=packed.input_ids, position_ids=packed.position_ids, **_model_kwargs()).logits
        return packed.unpack(values[0, :, 0].float())
    values = module(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **_model_kwargs()
    ).logits
    return torch.where(attention_mask.bool(), values[..., 0].float(), 0.0)

"""Model forward for one micro-batch: next-token log-probs / entropy (actor, ref) or values (critic).

All outputs are aligned with the padded input: ``out[b, t]`` belongs to position ``t``; for log-probs it is
``log p(input_ids[b, t + 1] | input_ids[b, :t + 1])`` so the response slice is ``out[:, -R - 1 : -1]``.
Padding positions are 0.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.workers.engine.fsdp.packing import pack


def _model_kwargs() -> dict:
    return {"use_cache": False}


def forward_log_probs(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = True,
    entropy_fn: Callable[[torch.Tensor], torch.Tensor] = entropy_from_logits,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token ``log_probs (bs, S)`` and optionally ``entropy (bs, S)`` of the tempered distribution.

    ``entropy_fn`` maps logits ``(..., V)`` to a per-token statistic ``(...)`` returned in the second slot: the
    entropy by default (chunked or recomputed in backward per the actor config), or another statistic such as
    ``sum_v pi_v^2``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        logits = module(input_ids=packed.input_ids, position_ids=packed.position_ids, **_model_kwargs()).logits
        logits = logits[0].float() / temperature  # (T, V)
        log_probs = packed.unpack(logprobs_from_logits(logits, packed.next_token_labels()))
        entropy = packed.unpack(entropy_fn(logits)) if calculate_entropy else None
        return log_probs, entropy
    logits = module(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **_model_kwargs()
    ).logits
    logits = logits.float() / temperature  # (bs, S, V)
    labels = torch.roll(input_ids, shifts=-1, dims=1)
    valid = attention_mask.bool()  # where(), not *: fully masked rows may hold NaN
    log_probs = torch.where(valid, logprobs_from_logits(logits, labels), 0.0)
    entropy = torch.where(valid, entropy_fn(logits), 0.0) if calculate_entropy else None
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

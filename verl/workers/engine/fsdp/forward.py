"""Model forward for one micro-batch: next-token log-probs / entropy (actor, ref) or values (critic).

All outputs are aligned with the padded input: ``out[b, t]`` belongs to position ``t``; for log-probs it is
``log p(input_ids[b, t + 1] | input_ids[b, :t + 1])`` so the response slice is ``out[:, -R - 1 : -1]``.
Padding positions are 0.

Log-probs and entropy come from :mod:`verl.utils.chunked_logprobs`: from the model's logits a chunk of rows at
a time (no float32 copy of the ``(T, V)`` logits), or with ``use_fused_kernels`` from the last hidden states
through the fused head (:mod:`verl.workers.engine.fsdp.head`), so the ``(T, V)`` logits never exist.
"""

from __future__ import annotations

import torch
from torch import nn

from verl.utils.chunked_logprobs import log_probs_from_logits
from verl.workers.engine.fsdp.head import fused_log_prob_head
from verl.workers.engine.fsdp.packing import pack


def _token_log_probs(
    module: nn.Module,
    labels: torch.Tensor,
    temperature: float,
    calculate_entropy: bool,
    use_fused_kernels: bool,
    compiled: bool,
    **inputs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log_probs (N,), entropy (N,) | None)`` of ``labels (N,)`` for the model's ``N`` input positions."""
    if use_fused_kernels:
        with fused_log_prob_head(module, labels, temperature, calculate_entropy, compiled):
            head_out = module(**inputs, use_cache=False).logits
        head_out = head_out.reshape(-1, head_out.shape[-1])
        return head_out[:, 0], (head_out[:, 1] if calculate_entropy else None)
    logits = module(**inputs, use_cache=False).logits
    flat = logits.reshape(-1, logits.shape[-1])
    return log_probs_from_logits(flat, labels, temperature, calculate_entropy, compiled=compiled)


def forward_log_probs(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = True,
    use_fused_kernels: bool = False,
    compiled: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token ``log_probs (bs, S)`` and optionally ``entropy (bs, S)`` of the tempered distribution;
    ``compiled`` fuses the log-prob/entropy math of each chunk with ``torch.compile``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    options = dict(
        temperature=temperature,
        calculate_entropy=calculate_entropy,
        use_fused_kernels=use_fused_kernels,
        compiled=compiled,
    )
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        log_probs, entropy = _token_log_probs(
            module,
            packed.next_token_labels(),
            input_ids=packed.input_ids,
            position_ids=packed.position_ids,
            **packed.attention_kwargs(),
            **options,
        )
        return packed.unpack(log_probs), (packed.unpack(entropy) if entropy is not None else None)
    labels = torch.roll(input_ids, shifts=-1, dims=1)
    log_probs, entropy = _token_log_probs(
        module,
        labels.reshape(-1),
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        **options,
    )
    valid = attention_mask.bool()  # where(), not *: fully masked rows may hold NaN
    log_probs = torch.where(valid, log_probs.view_as(input_ids), 0.0)
    entropy = torch.where(valid, entropy.view_as(input_ids), 0.0) if entropy is not None else None
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
        values = module(
            input_ids=packed.input_ids, position_ids=packed.position_ids, use_cache=False, **packed.attention_kwargs()
        ).logits
        return packed.unpack(values[0, :, 0].float())
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
    values = module(**inputs, use_cache=False).logits
    return torch.where(attention_mask.bool(), values[..., 0].float(), 0.0)

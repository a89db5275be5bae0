"""Model forward for one micro-batch: next-token log-probs / entropy (actor, ref) or values (critic).

All outputs are aligned with the padded input: ``out[b, t]`` belongs to position ``t``; for log-probs it is
``log p(input_ids[b, t + 1] | input_ids[b, :t + 1])`` so the response slice is ``out[:, -R - 1 : -1]``.
Padding positions are 0. With a ``UlyssesMesh`` of ``sp_size > 1`` the packed tokens are split over the
sequence-parallel group and the outputs gathered back (``ulysses.forward_packed``); remove-padding is required.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from verl.models.transformers.qwen2_vl import packed_model_position_ids, padded_model_position_ids
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.workers.engine.fsdp.packing import PackedBatch, pack
from verl.workers.engine.fsdp.ulysses import PerTokenHeads, UlyssesMesh, forward_packed


def _model_kwargs(multi_modal_inputs: dict | None = None) -> dict:
    return {"use_cache": False, **(multi_modal_inputs or {})}


def _packed_positions(packed: PackedBatch) -> torch.Tensor:
    """Model position ids of a packed batch: ``(1, T)``, or ``(4, 1, T)`` for M-RoPE (text row first)."""
    if packed.position_ids.dim() == 3:
        return packed_model_position_ids(packed.position_ids, packed.cu_seqlens)
    return packed.position_ids


def _run_packed(
    module: nn.Module,
    packed: PackedBatch,
    heads: PerTokenHeads,
    ulysses: UlyssesMesh | None,
    multi_modal_inputs: dict | None = None,
) -> list[torch.Tensor]:
    """``heads`` applied to the model outputs of the whole pack: ``[per-token (T,), ...]``."""
    if ulysses is not None and ulysses.enabled:
        if multi_modal_inputs or packed.position_ids.dim() != 2:
            raise ValueError("Ulysses sequence parallelism takes text-only batches with (bs, S) position_ids")
        return forward_packed(module, packed, ulysses, heads)
    outputs = module(
        input_ids=packed.input_ids, position_ids=_packed_positions(packed), **_model_kwargs(multi_modal_inputs)
    ).logits
    return heads(outputs[0], packed.next_token_labels())


def _require_packing(ulysses: UlyssesMesh | None) -> None:
    if ulysses is not None and ulysses.enabled:
        raise ValueError(
            "ulysses_sequence_parallel_size > 1 needs remove-padding: set model.use_remove_padding=True "
            "(actor_rollout_ref.model.use_remove_padding / critic.model.use_remove_padding / use_remove_padding)"
        )


def forward_log_probs(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = True,
    entropy_fn: Callable[[torch.Tensor], torch.Tensor] = entropy_from_logits,
    multi_modal_inputs: dict | None = None,
    ulysses: UlyssesMesh | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token ``log_probs (bs, S)`` and optionally ``entropy (bs, S)`` of the tempered distribution.

    ``entropy_fn`` maps logits ``(..., V)`` to a per-token statistic ``(...)`` returned in the second slot: the
    entropy by default (chunked or recomputed in backward per the actor config), or another statistic such as
    ``sum_v pi_v^2``. ``multi_modal_inputs`` (``pixel_values``, ``image_grid_thw``, ... of the micro-batch's rows,
    concatenated in row order) go to the model as keyword arguments; ``position_ids`` may be M-RoPE ``(bs, 3, S)``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)

        def heads(logits: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
            logits = logits.float() / temperature  # (T, V)
            log_probs = [logprobs_from_logits(logits, labels)]
            return log_probs + [entropy_fn(logits)] if calculate_entropy else log_probs

        outputs = _run_packed(module, packed, heads, ulysses, multi_modal_inputs)
        entropy = packed.unpack(outputs[1]) if calculate_entropy else None
        return packed.unpack(outputs[0]), entropy
    _require_packing(ulysses)
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
    entropy = torch.where(valid, entropy_fn(logits), 0.0) if calculate_entropy else None
    return log_probs, entropy


def forward_values(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    use_remove_padding: bool = True,
    ulysses: UlyssesMesh | None = None,
) -> torch.Tensor:
    """Scalar ``values (bs, S)`` from a value model whose output ``logits`` are ``(..., 1)``."""
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        values = _run_packed(module, packed, lambda scores, _labels: [scores[:, 0].float()], ulysses)
        return packed.unpack(values[0])
    _require_packing(ulysses)
    values = module(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **_model_kwargs()
    ).logits
    return torch.where(attention_mask.bool(), values[..., 0].float(), 0.0)

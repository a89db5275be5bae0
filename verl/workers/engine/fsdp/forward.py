"""Model forward for one micro-batch: next-token log-probs / entropy (actor, ref) or values (critic).

All outputs are aligned with the padded input: ``out[b, t]`` belongs to position ``t``; for log-probs it is
``log p(input_ids[b, t + 1] | input_ids[b, :t + 1])`` so the response slice is ``out[:, -R - 1 : -1]``.
Padding positions are 0. With a ``UlyssesMesh`` of ``sp_size > 1`` the packed tokens are split over the
sequence-parallel group and the outputs gathered back (``ulysses.forward_packed``); remove-padding is required.

Log-probs and entropy come from :mod:`verl.utils.chunked_logprobs`: from the model's logits a chunk of rows at
a time (no float32 copy of the ``(T, V)`` logits), or with ``use_fused_kernels`` from the last hidden states
through the fused head (:mod:`verl.workers.engine.fsdp.head`), so the ``(T, V)`` logits never exist.

With ``response_length`` (the actor and the reference, whose callers keep only the response slice) the output
layer runs on the positions that predict a response token alone: the packed rows of padded columns
``S - R - 1 .. S - 2`` go to the model as transformers' ``logits_to_keep``, the prompt rows skip the vocabulary
projection and the log-softmax, and their outputs are 0. On GSM8K-like batches that is half the tokens or more.
On the device types of :data:`RESPONSE_ROWS_DEVICES` (the CPU for now).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn

from verl.models.transformers.qwen2_vl import packed_model_position_ids, padded_model_position_ids
from verl.utils.chunked_logprobs import log_probs_from_logits
from verl.utils.device import get_device_name
from verl.workers.engine.fsdp.head import fused_log_prob_head
from verl.workers.engine.fsdp.packing import PackedBatch, pack
from verl.workers.engine.fsdp.ulysses import PerTokenHeads, UlyssesMesh, forward_packed


def _model_kwargs(multi_modal_inputs: dict | None = None) -> dict:
    return {"use_cache": False, **(multi_modal_inputs or {})}


def _packed_positions(packed: PackedBatch) -> torch.Tensor:
    """Model position ids of a packed batch: ``(1, T)``, or ``(4, 1, T)`` for M-RoPE (text row first)."""
    if packed.position_ids.dim() == 3:
        return packed_model_position_ids(packed.position_ids, packed.cu_seqlens)
    return packed.position_ids


def keeps_logit_rows(module: nn.Module) -> bool:
    """Whether the causal LM's forward takes transformers' ``logits_to_keep`` (a peft wrapper passes it through
    to its base model)."""
    base = module.get_base_model() if hasattr(module, "get_base_model") else module
    return "logits_to_keep" in inspect.signature(base.forward).parameters


RESPONSE_ROWS_DEVICES: tuple[str, ...] = ("cpu",)
"""Device types where the output layer runs on the response rows alone. Measured faster on the CPU (the demo's update
21.3 -> 17.1 s a step, session 34); CUDA keeps every row, the path issue 15's GPU numbers were measured on, until
``benchmarks/gpu/calls.sh rows15`` sets the two side by side (its one-off GPU run was inconclusive)."""


def head_rows_only(module: nn.Module, use_remove_padding: bool, ulysses: UlyssesMesh | None) -> bool:
    """Whether :func:`forward_log_probs` with ``response_length`` runs the output layer on the response rows alone:
    packed, without Ulysses (which splits the pack over ranks), a model that takes ``logits_to_keep``, and this
    process computing on a device type of :data:`RESPONSE_ROWS_DEVICES`."""
    if not use_remove_padding or (ulysses is not None and ulysses.enabled):
        return False
    return get_device_name() in RESPONSE_ROWS_DEVICES and keeps_logit_rows(module)


def response_head_rows(packed: PackedBatch, attention_mask: torch.Tensor, response_length: int) -> torch.Tensor:
    """Packed indices ``(K,)`` of the positions whose next token is a response token: the padded columns
    ``S - R - 1 .. S - 2`` (a sequence's last prompt token and its response but the last column) that hold a
    token."""
    seqlen = attention_mask.shape[-1]
    columns = torch.arange(seqlen, device=attention_mask.device)
    wanted = (columns >= seqlen - response_length - 1) & (columns < seqlen - 1)
    rows = (attention_mask.bool() & wanted).reshape(-1)[packed.indices]  # pack() took indices from this mask
    return torch.nonzero(rows, as_tuple=False).flatten()


def _run_packed(
    module: nn.Module,
    packed: PackedBatch,
    heads: PerTokenHeads,
    ulysses: UlyssesMesh | None,
    multi_modal_inputs: dict | None = None,
    head_rows: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """``heads`` applied to the model outputs of the whole pack: ``[per-token (T,), ...]``. The sequence
    boundaries go to the attention functions as transformers' flash-attention kwargs. With ``head_rows (K,)``
    the output layer and ``heads`` see those rows alone, and the other rows' outputs are 0."""
    if ulysses is not None and ulysses.enabled:
        if multi_modal_inputs or packed.position_ids.dim() != 2:
            raise ValueError("Ulysses sequence parallelism takes text-only batches with (bs, S) position_ids")
        return forward_packed(module, packed, ulysses, heads)
    keep = {} if head_rows is None else {"logits_to_keep": head_rows}
    outputs = module(
        input_ids=packed.input_ids,
        position_ids=_packed_positions(packed),
        **packed.attention_kwargs(),
        **_model_kwargs(multi_modal_inputs),
        **keep,
    ).logits
    labels = packed.next_token_labels()
    if head_rows is None:
        return heads(outputs[0], labels)
    # out of place: autograd reaches the kept rows
    return [
        column.new_zeros(labels.shape[0]).index_copy(0, head_rows, column)
        for column in heads(outputs[0], labels[head_rows])
    ]


def _require_packing(ulysses: UlyssesMesh | None) -> None:
    if ulysses is not None and ulysses.enabled:
        raise ValueError(
            "ulysses_sequence_parallel_size > 1 needs remove-padding: set model.use_remove_padding=True "
            "(actor_rollout_ref.model.use_remove_padding / critic.model.use_remove_padding / use_remove_padding)"
        )


def _log_prob_heads(
    temperature: float, calculate_entropy: bool, compiled: bool, entropy_fn: Callable | None = None
) -> PerTokenHeads:
    """Per-token log-probs (and entropy, or ``entropy_fn`` of the float32 tempered logits) from ``(t, V)`` logits,
    chunked (:func:`log_probs_from_logits`)."""

    def heads(logits: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
        if calculate_entropy and entropy_fn is not None:
            # the statistic reads the logits: log-probs must not take them over in backward
            statistic = entropy_fn(logits.float() / temperature)
            log_probs, _ = log_probs_from_logits(logits.clone(), labels, temperature, compiled=compiled)
            return [log_probs, statistic]
        log_probs, entropy = log_probs_from_logits(logits, labels, temperature, calculate_entropy, compiled=compiled)
        return [log_probs] if entropy is None else [log_probs, entropy]

    return heads


def _fused_head_columns(outputs: torch.Tensor, _labels: torch.Tensor) -> list[torch.Tensor]:
    """The fused head's ``(t, 1 or 2)`` output (log-prob, entropy) as per-token tensors."""
    return [outputs[:, column] for column in range(outputs.shape[-1])]


def forward_log_probs(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = True,
    entropy_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
    multi_modal_inputs: dict | None = None,
    ulysses: UlyssesMesh | None = None,
    use_fused_kernels: bool = False,
    compiled: bool = False,
    response_length: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token ``log_probs (bs, S)`` and optionally ``entropy (bs, S)`` of the tempered distribution.

    ``entropy_fn`` maps float32 tempered logits ``(..., V)`` to a per-token statistic ``(...)`` returned in the
    second slot instead of the chunked entropy (the actor's ``entropy_checkpointing``, or another statistic such as
    ``sum_v pi_v^2``); it needs the logits, so not with ``use_fused_kernels``. ``multi_modal_inputs``
    (``pixel_values``, ``image_grid_thw``, ... of the micro-batch's rows, concatenated in row order) go to the
    model as keyword arguments; ``position_ids`` may be M-RoPE ``(bs, 3, S)``. ``use_fused_kernels`` runs the
    fused log-prob head; ``compiled`` fuses each chunk's math with torch.compile. ``response_length`` ``R``: only
    the positions that predict the last ``R`` columns are computed (the others are 0), where :func:`head_rows_only`
    allows it."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    if use_fused_kernels and ulysses is not None and ulysses.enabled:
        raise ValueError("model.use_fused_kernels=True does not combine with ulysses_sequence_parallel_size > 1")
    if use_fused_kernels and entropy_fn is not None and calculate_entropy:
        raise ValueError("a per-token statistic of the logits (entropy_fn) needs them: not with use_fused_kernels")
    if use_remove_padding:
        packed = pack(input_ids, attention_mask, position_ids)
        rows = None
        if response_length is not None and head_rows_only(module, use_remove_padding, ulysses):
            rows = response_head_rows(packed, attention_mask, response_length)
        if use_fused_kernels:
            labels = packed.next_token_labels()
            labels = labels if rows is None else labels[rows]
            with fused_log_prob_head(module, labels, temperature, calculate_entropy, compiled):
                outputs = _run_packed(module, packed, _fused_head_columns, None, multi_modal_inputs, rows)
        else:
            heads = _log_prob_heads(temperature, calculate_entropy, compiled, entropy_fn)
            outputs = _run_packed(module, packed, heads, ulysses, multi_modal_inputs, rows)
        entropy = packed.unpack(outputs[1]) if calculate_entropy else None
        return packed.unpack(outputs[0]), entropy
    _require_packing(ulysses)
    labels = torch.roll(input_ids, shifts=-1, dims=1).reshape(-1)
    inputs = dict(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=padded_model_position_ids(position_ids)
    )
    if use_fused_kernels:
        with fused_log_prob_head(module, labels, temperature, calculate_entropy, compiled):
            head_out = module(**inputs, **_model_kwargs(multi_modal_inputs)).logits
        outputs = _fused_head_columns(head_out.reshape(-1, head_out.shape[-1]), labels)
    else:
        logits = module(**inputs, **_model_kwargs(multi_modal_inputs)).logits
        outputs = _log_prob_heads(temperature, calculate_entropy, compiled)(
            logits.reshape(-1, logits.shape[-1]), labels
        )
    valid = attention_mask.bool()  # where(), not *: fully masked rows may hold NaN
    log_probs = torch.where(valid, outputs[0].view_as(input_ids), 0.0)
    entropy = torch.where(valid, outputs[1].view_as(input_ids), 0.0) if calculate_entropy else None
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

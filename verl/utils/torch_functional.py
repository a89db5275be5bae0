"""Tensor utilities shared by the actor, critic, rollout and trainer.

Conventions: ``mask`` tensors are 1 on real tokens and 0 on padding, with the same shape as ``values``.
Log-probabilities and entropies are computed in float32 (float64 when the logits are float64) whatever the
logits' dtype, so bf16 logits lose no precision in the reduction.

Fully masked inputs: ``masked_sum`` gives 0 and ``masked_mean`` gives 0 for a row (or tensor) with no
unmasked element, never NaN; ``masked_var`` / ``masked_whiten`` need at least one unmasked element (two when
``unbiased``) and raise ``ValueError`` otherwise, since a spread of nothing has no meaning. Masked-out positions
never leak into a result, even when they hold NaN or inf.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from verl.utils.attention_utils import index_first_axis, pad_input, unpad_input
from verl.utils.distributed_stats import allgather_dict_into_dict, distributed_masked_mean, distributed_mean_max_min_std

__all__ = [
    "allgather_dict_into_dict",
    "clip_by_value",
    "distributed_masked_mean",
    "distributed_mean_max_min_std",
    "expand_as_nested",
    "log_probs_from_logits_all_rmpad",
    "compute_position_id_with_mask",
    "entropy_from_logits",
    "entropy_from_logits_with_chunking",
    "get_constant_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_eos_mask",
    "get_response_mask",
    "index_first_axis",
    "logprobs_from_logits",
    "logprobs_from_logits_naive",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "pad_2d_list_to_length",
    "pad_input",
    "sum_pi_squared_from_logits",
    "pad_sequence_to_length",
    "postprocess_data",
    "tokenize_and_postprocess_data",
    "unpad_input",
]

# Rows per chunk are chosen so that one fp32 chunk holds about this many elements (64 MiB).
_CHUNK_ELEMENTS = 1 << 24


def _reduction_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _rows_per_chunk(vocab_size: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, vocab_size))


# --------------------------------------------------------------------------------------------------------------------
# log-probabilities and entropy
# --------------------------------------------------------------------------------------------------------------------


class _ChunkedLogProbs(torch.autograd.Function):
    """``log_softmax(logits)[label]`` over ``(N, V)`` logits, computed ``_rows_per_chunk`` rows at a time.

    Forward keeps only the per-row log-sum-exp ``(N,)``; backward rebuilds ``softmax`` chunk by chunk:
    ``d logp_i / d logits_i = onehot(label_i) - softmax(logits_i)``.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool) -> torch.Tensor:
        out_dtype = _reduction_dtype(logits.dtype)
        num_rows, vocab_size = logits.shape
        step = _rows_per_chunk(vocab_size)
        log_sum_exp = torch.empty(num_rows, dtype=out_dtype, device=logits.device)
        label_logits = torch.gather(logits, 1, labels.unsqueeze(1)).squeeze(1).to(out_dtype)
        for start in range(0, num_rows, step):
            log_sum_exp[start : start + step] = torch.logsumexp(logits[start : start + step].to(out_dtype), dim=-1)
        ctx.save_for_backward(logits, labels, log_sum_exp)
        ctx.inplace_backward = inplace_backward
        return label_logits - log_sum_exp

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output: torch.Tensor):
        logits, labels, log_sum_exp = ctx.saved_tensors
        num_rows, vocab_size = logits.shape
        step = _rows_per_chunk(vocab_size)
        grad_logits = logits if ctx.inplace_backward else torch.empty_like(logits)
        for start in range(0, num_rows, step):
            rows = slice(start, start + step)
            grad_rows = grad_output[rows].to(log_sum_exp.dtype).unsqueeze(1)
            chunk_grad = torch.exp(logits[rows].to(log_sum_exp.dtype) - log_sum_exp[rows].unsqueeze(1))
            chunk_grad.mul_(-grad_rows)
            chunk_grad.scatter_add_(1, labels[rows].unsqueeze(1), grad_rows)
            grad_logits[rows] = chunk_grad
        return grad_logits, None, None


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True) -> torch.Tensor:
    """Log-probability of each label: ``log_softmax(logits, -1).gather(-1, labels)``.

    Shapes: ``logits (..., V)``, ``labels (...)`` -> ``(...)`` in float32 (float64 for float64 logits).
    Rows are processed in chunks of about 64 MiB of float32, so a 150k vocabulary never materialises a
    full-size float32 copy of bf16 logits, neither in forward nor in backward.

    ``inplace_backward=True`` writes the gradient into the logits' own storage during backward (as
    flash-attn's cross entropy does), saving one logits-sized buffer; the logits' values are gone after
    ``backward()``. Autograd's version check refuses this if another op saved the same logits, and it is
    never done for leaf tensors. Pass ``False`` when the logits are used again (e.g. for the entropy).
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits shape {tuple(logits.shape)} does not match labels shape {tuple(labels.shape)}")
    leading_shape = labels.shape
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_labels = labels.reshape(-1).long()
    inplace = inplace_backward and not logits.is_leaf and flat_logits.data_ptr() == logits.data_ptr()
    log_probs = _ChunkedLogProbs.apply(flat_logits, flat_labels, inplace)
    return log_probs.reshape(leading_shape)


def logprobs_from_logits_naive(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``log_softmax`` + gather, materialising the full ``(..., V)`` log-softmax (reference and benchmark)."""
    log_softmax = F.log_softmax(logits.to(_reduction_dtype(logits.dtype)), dim=-1)
    return log_softmax.gather(-1, labels.long().unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of ``softmax(logits)`` over the last dim: ``H = logsumexp(l) - sum(softmax(l) * l)``.

    ``logits (..., V)`` -> ``(...)`` in float32 (float64 for float64 logits).
    """
    logits = logits.to(_reduction_dtype(logits.dtype))
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def entropy_from_logits_with_chunking(logits: torch.Tensor, chunk_size: int = 2048) -> torch.Tensor:
    """:func:`entropy_from_logits` computed ``chunk_size`` rows at a time, bounding the float32 temporaries."""
    flat_logits = logits.reshape(-1, logits.shape[-1])
    pieces = [
        entropy_from_logits(flat_logits[start : start + chunk_size]) for start in range(0, len(flat_logits), chunk_size)
    ]
    if not pieces:
        return torch.empty(logits.shape[:-1], dtype=_reduction_dtype(logits.dtype), device=logits.device)
    return torch.cat(pieces).reshape(logits.shape[:-1])


# --------------------------------------------------------------------------------------------------------------------
# masked reductions
# --------------------------------------------------------------------------------------------------------------------


def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(values * mask)`` over ``axis`` (all elements when None); masked-out NaN/inf are ignored."""
    weighted = torch.where(mask.bool(), values * mask, torch.zeros((), dtype=values.dtype, device=values.device))
    return weighted.sum() if axis is None else weighted.sum(dim=axis)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(values * mask) / sum(mask)`` over ``axis``; 0 where the mask sums to 0 (no NaN)."""
    total = masked_sum(values, mask, axis)
    count = mask.sum() if axis is None else mask.sum(dim=axis)
    count = count.to(total.dtype)
    return torch.where(count != 0, total / torch.where(count != 0, count, torch.ones_like(count)), 0.0)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of the unmasked elements: ``masked_mean((values - mean)^2)``, times ``n / (n - 1)`` if unbiased.

    Raises ``ValueError`` when fewer than one (biased) or two (unbiased) elements are unmasked.
    """
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    count = mask.sum()
    if count == 0:
        raise ValueError("masked_var: the mask has no unmasked element; at least one is needed")
    if unbiased:
        if count == 1:
            raise ValueError("masked_var: the mask has a single unmasked element; unbiased variance needs two")
        variance = variance * (count / (count - 1))
    return variance


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)`` with the masked mean and unbiased variance; keeps the mean if
    ``shift_mean`` is False. Masked-out positions are transformed too (multiply by the mask downstream)."""
    mean, variance = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(variance + 1e-8)
    return whitened if shift_mean else whitened + mean


def clip_by_value(x: torch.Tensor, tensor_min: torch.Tensor | float, tensor_max: torch.Tensor | float) -> torch.Tensor:
    """Element-wise ``min(max(x, tensor_min), tensor_max)`` with tensor or scalar bounds."""
    return torch.clamp(x, min=tensor_min, max=tensor_max)


# --------------------------------------------------------------------------------------------------------------------
# masks, positions, padding
# --------------------------------------------------------------------------------------------------------------------


def get_response_mask(
    response_id: torch.Tensor, eos_token: int | list[int] = 2, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    """1 up to and including the first EOS of each row, 0 after it. ``response_id (bs, R)`` -> ``(bs, R)``.

    ``eos_token`` may be one id or a list of ids (any of them ends the response).
    """
    eos_ids = torch.as_tensor(eos_token, device=response_id.device).reshape(-1)
    is_eos = torch.isin(response_id, eos_ids).int()
    eos_before = is_eos.cumsum(dim=-1) - is_eos
    return (eos_before == 0).to(dtype)


get_eos_mask = get_response_mask


def compute_position_id_with_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids counting only unmasked tokens: ``clip(cumsum(mask) - 1, min=0)`` (left padding gets 0)."""
    return torch.clip(torch.cumsum(mask, dim=-1) - 1, min=0)


def pad_sequence_to_length(
    tensors: torch.Tensor, max_seq_len: int, pad_token_id: int | float, left_pad: bool = False
) -> torch.Tensor:
    """Pad the last dim to ``max_seq_len`` with ``pad_token_id`` (left or right); longer tensors are returned as is."""
    missing = max_seq_len - tensors.shape[-1]
    if missing <= 0:
        return tensors
    padding = (missing, 0) if left_pad else (0, missing)
    return F.pad(tensors, padding, mode="constant", value=pad_token_id)


def pad_2d_list_to_length(response: list[list[int]], pad_token_id: int, max_length: int | None = None) -> torch.Tensor:
    """Right-pad a list of token lists into a ``(len(response), max_length)`` tensor."""
    longest = max((len(row) for row in response), default=0)
    target = longest if max_length is None else max(max_length, longest)
    padded = [list(row) + [pad_token_id] * (target - len(row)) for row in response]
    result = torch.tensor(padded, dtype=torch.long).reshape(len(response), target)
    return result if max_length is None else result[:, :max_length]


def postprocess_data(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_length: int,
    pad_token_id: int,
    left_pad: bool = True,
    truncation: str = "error",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad or truncate ``(bs, L)`` ids and mask to ``max_length``.

    ``truncation``: ``"left"`` keeps the last tokens, ``"right"`` the first, ``"middle"`` both ends,
    ``"error"`` raises naming both lengths.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"postprocess_data expects (bs, L) input_ids, got shape {tuple(input_ids.shape)}")
    seq_len = input_ids.shape[-1]
    if seq_len < max_length:
        input_ids = pad_sequence_to_length(input_ids, max_length, pad_token_id, left_pad=left_pad)
        attention_mask = pad_sequence_to_length(attention_mask, max_length, 0, left_pad=left_pad)
    elif seq_len > max_length:
        if truncation == "left":
            input_ids, attention_mask = input_ids[:, -max_length:], attention_mask[:, -max_length:]
        elif truncation == "right":
            input_ids, attention_mask = input_ids[:, :max_length], attention_mask[:, :max_length]
        elif truncation == "middle":
            head = max_length // 2
            tail = max_length - head
            input_ids = torch.cat([input_ids[:, :head], input_ids[:, seq_len - tail :]], dim=-1)
            attention_mask = torch.cat([attention_mask[:, :head], attention_mask[:, seq_len - tail :]], dim=-1)
        elif truncation == "error":
            raise ValueError(f"sequence length {seq_len} is longer than max_length {max_length} (truncation='error')")
        else:
            raise ValueError(f"unknown truncation {truncation!r}; use 'left', 'right', 'middle' or 'error'")
    return input_ids, attention_mask


def tokenize_and_postprocess_data(
    prompt: str,
    tokenizer,
    max_length: int,
    pad_token_id: int,
    left_pad: bool = True,
    truncation: str = "error",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokenize one prompt (no special tokens added) and pad/truncate it to ``(1, max_length)``."""
    encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    return postprocess_data(
        encoded["input_ids"], encoded["attention_mask"], max_length, pad_token_id, left_pad, truncation
    )


# --------------------------------------------------------------------------------------------------------------------
# learning-rate schedules
# --------------------------------------------------------------------------------------------------------------------


def get_constant_schedule_with_warmup(optimizer: Optimizer, num_warmup_steps: int, last_epoch: int = -1) -> LambdaLR:
    """LR factor ``step / num_warmup_steps`` during warmup, then 1."""

    def lr_factor(step: int) -> float:
        return min(1.0, step / max(1, num_warmup_steps))

    return LambdaLR(optimizer, lr_factor, last_epoch)


def get_cosine_schedule_with_warmup(
    optimizer: Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
    init_lr_ratio: float | None = None,
) -> LambdaLR:
    """Linear warmup from ``init_lr_ratio`` (default 0) to 1, then a cosine from 1 down to ``min_lr_ratio``.

    After warmup, with ``p = (step - warmup) / (total - warmup)``:
    ``factor = max(min_lr_ratio, min_lr_ratio + (1 - min_lr_ratio) * (1 + cos(2 pi num_cycles p)) / 2)``.
    """
    min_lr_ratio = 0.0 if min_lr_ratio is None else min_lr_ratio
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
    start_ratio = 0.0 if init_lr_ratio is None else init_lr_ratio

    def lr_factor(step: int) -> float:
        if step < num_warmup_steps:
            return start_ratio + (1.0 - start_ratio) * step / max(1, num_warmup_steps)
        progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(2.0 * math.pi * num_cycles * progress))
        return max(min_lr_ratio, min_lr_ratio + (1.0 - min_lr_ratio) * cosine)

    return LambdaLR(optimizer, lr_factor, last_epoch)


def sum_pi_squared_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """``sum_v softmax(logits)_v^2`` over the vocabulary, ``(..., V) -> (...)`` (the collision probability of the
    next-token distribution, used by the optimal-token-baseline estimator)."""
    probs = torch.softmax(logits.to(_reduction_dtype(logits.dtype)), dim=-1)
    return probs.pow(2).sum(dim=-1)


def log_probs_from_logits_all_rmpad(
    input_ids_rmpad: torch.Tensor,
    logits_rmpad: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    seqlen: int,
    response_length: int,
) -> torch.Tensor:
    """Response log-probs ``(batch_size, response_length)`` from packed (padding-removed) logits.

    ``input_ids_rmpad (1, total_nnz)`` and ``logits_rmpad (total_nnz, vocab)`` hold the valid tokens of every
    sequence back to back; ``indices (total_nnz,)`` are their positions in the flattened ``(batch_size * seqlen)``
    padded batch. Token ``t + 1`` is scored by the logits at ``t``; positions are scattered back and the last
    ``response_length`` scores before the final position are returned.
    """
    labels = torch.roll(input_ids_rmpad.reshape(-1), shifts=-1, dims=0)
    log_probs = logprobs_from_logits(logits_rmpad, labels)
    padded = pad_input(log_probs.unsqueeze(-1), indices, batch_size, seqlen).squeeze(-1)
    return padded[:, -response_length - 1 : -1]


def expand_as_nested(tensor: torch.Tensor, nested_tensor: torch.Tensor) -> torch.Tensor:
    """A jagged nested tensor shaped like ``nested_tensor (bsz, j1)`` whose row ``i`` repeats ``tensor[i]`` (e.g. a
    per-sample temperature spread over that sample's tokens)."""
    assert nested_tensor.is_nested, "expand_as_nested needs a nested tensor to take the row lengths from"
    assert tensor.dim() == 1 and tensor.shape[0] == nested_tensor.size(0), (
        f"tensor of shape {tuple(tensor.shape)} does not match {nested_tensor.size(0)} nested rows"
    )
    lengths = nested_tensor.offsets().diff()
    values = torch.repeat_interleave(tensor.to(nested_tensor.device), lengths)
    return torch.nested.nested_tensor_from_jagged(values, offsets=nested_tensor.offsets())

"""Token log-probabilities and entropies from logits as two Triton kernels: one pass over the logits forward, one
pass backward that writes the gradient over them.

The math is :mod:`verl.utils.chunked_logprobs`' (``z = logits / T``, ``lse = logsumexp(z)``, ``log_prob = z_y - lse``,
``H = lse - sum_j p_j z_j``; gradients ``d log_prob / d z_j = 1[j = y] - p_j`` and ``d H / d z_j = -p_j (log p_j +
H)``). What differs is the memory traffic on a GPU, where these passes are bound by it:

* forward: one program per row reads the row once, keeping a running maximum ``m``, ``s = sum_j exp(z_j - m)`` and
  ``t = sum_j exp(z_j - m) z_j`` (rescaled by ``exp(m_old - m)`` when the maximum grows), so
  ``lse = m + log s`` and ``H = lse - t / s``. No float32 copy of the logits exists; the compiled chunk path reads
  each row twice (maximum, then sum) and writes nothing but also needs ``(rows, V)`` index arithmetic per element.
* backward: one program per (row, block of columns) reads the block, forms the gradient in float32 registers and
  writes it in the logits' dtype, in place when the logits are the model's own (non-leaf) output.

Measured on an H200 (``benchmarks/bench_gpu_update.py``) against the ``torch.compile`` chunks: see
``benchmarks/results/gpu_session19_2026-11-28.md``. :func:`usable` says where these kernels run (CUDA, Triton
importable, a float16/bfloat16/float32 ``(N, V)`` with unit column stride); elsewhere the chunked path runs.
``VERL_LOGPROB_KERNEL=compile`` forces the chunked ``torch.compile`` path (a benchmark's same-call baseline).
"""

from __future__ import annotations

import os
from functools import cache

import torch

BLOCK_V = 4096  # columns a program handles per step: 16 per thread at 8 warps
NUM_WARPS = 8
ENV = "VERL_LOGPROB_KERNEL"  # "compile": the chunked torch.compile path even where these kernels run


@cache
def _triton():
    """The Triton module and both kernels, or None where Triton cannot be imported."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def forward_kernel(
        logits_ptr, labels_ptr, log_prob_ptr, lse_ptr, entropy_ptr, row_stride, vocab, inv_temperature,
        TEMPERED: tl.constexpr, ENTROPY: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        row = tl.program_id(0).to(tl.int64)
        base = logits_ptr + row * row_stride
        columns = tl.arange(0, BLOCK)
        running_max = -float("inf")
        sum_exp = 0.0
        sum_exp_z = 0.0
        for start in range(0, vocab, BLOCK):
            mask = start + columns < vocab
            z = tl.load(base + start + columns, mask=mask, other=-float("inf")).to(tl.float32)
            if TEMPERED:
                z = z * inv_temperature
            new_max = tl.maximum(running_max, tl.max(z, axis=0))
            rescale = tl.exp(running_max - new_max)
            e = tl.exp(z - new_max)  # 0 at masked columns
            sum_exp = sum_exp * rescale + tl.sum(e, axis=0)
            if ENTROPY:
                sum_exp_z = sum_exp_z * rescale + tl.sum(tl.where(mask, e * z, 0.0), axis=0)
            running_max = new_max
        lse = running_max + tl.log(sum_exp)
        label = tl.load(labels_ptr + row)
        # a label outside the vocabulary reads nothing (log-prob -inf) where torch's gather would raise
        z_label = tl.load(base + label, mask=(label >= 0) & (label < vocab), other=-float("inf")).to(tl.float32)
        if TEMPERED:
            z_label = z_label * inv_temperature
        tl.store(log_prob_ptr + row, z_label - lse)
        tl.store(lse_ptr + row, lse)
        if ENTROPY:
            tl.store(entropy_ptr + row, lse - sum_exp_z / sum_exp)

    @triton.jit
    def backward_kernel(
        logits_ptr, grad_ptr, labels_ptr, lse_ptr, entropy_ptr, grad_log_prob_ptr, grad_entropy_ptr, row_stride,
        grad_row_stride, vocab, inv_temperature,
        TEMPERED: tl.constexpr, LOG_PROB_GRAD: tl.constexpr, ENTROPY_GRAD: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        row = tl.program_id(0).to(tl.int64)
        columns = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = columns < vocab
        z = tl.load(logits_ptr + row * row_stride + columns, mask=mask, other=0.0).to(tl.float32)
        if TEMPERED:
            z = z * inv_temperature
        log_p = z - tl.load(lse_ptr + row)
        p = tl.exp(log_p)
        grad = tl.zeros([BLOCK], dtype=tl.float32)
        if LOG_PROB_GRAD:
            grad_log_prob = tl.load(grad_log_prob_ptr + row).to(tl.float32)
            label = tl.load(labels_ptr + row)
            grad = tl.where(columns == label, grad_log_prob, 0.0) - p * grad_log_prob
        if ENTROPY_GRAD:
            entropy = tl.load(entropy_ptr + row)
            grad_entropy = tl.load(grad_entropy_ptr + row).to(tl.float32)
            grad = grad - (log_p + entropy) * p * grad_entropy
        if TEMPERED:
            grad = grad * inv_temperature
        tl.store(grad_ptr + row * grad_row_stride + columns, grad.to(grad_ptr.dtype.element_ty), mask=mask)

    return triton, forward_kernel, backward_kernel


@cache
def _triton_runs_on(device_index: int) -> bool:
    """Triton compiles for Volta (compute capability 7.0) and newer."""
    return torch.cuda.get_device_capability(device_index) >= (7, 0)


def usable(logits: torch.Tensor) -> bool:
    """Whether the kernels take ``logits``: on a CUDA GPU Triton compiles for, Triton importable,
    float16/bfloat16/float32 ``(N, V)`` with unit column stride, and ``VERL_LOGPROB_KERNEL`` not ``compile``."""
    if os.environ.get(ENV, "").strip().lower() == "compile":
        return False
    return (
        logits.is_cuda
        and logits.dim() == 2
        and logits.dtype in (torch.float16, torch.bfloat16, torch.float32)
        and (logits.stride(1) == 1 or logits.shape[1] == 1)
        and _triton() is not None
        and _triton_runs_on(logits.device.index if logits.device.index is not None else torch.cuda.current_device())
    )


def forward(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``(log_prob (N,), entropy (N,) | None, lse (N,))``, float32, of ``logits (N, V)`` at ``labels (N,)``."""
    _, forward_kernel, _ = _triton()
    rows, vocab = logits.shape
    log_prob = torch.empty(rows, dtype=torch.float32, device=logits.device)
    lse = torch.empty_like(log_prob)
    entropy = torch.empty_like(log_prob) if with_entropy else lse  # a placeholder pointer when not asked
    if rows:
        forward_kernel[(rows,)](
            logits, labels, log_prob, lse, entropy, logits.stride(0), vocab, 1.0 / temperature,
            TEMPERED=temperature != 1.0, ENTROPY=with_entropy, BLOCK=BLOCK_V, num_warps=NUM_WARPS,
        )  # fmt: skip
    return log_prob, entropy if with_entropy else None, lse


def backward(
    logits: torch.Tensor,
    labels: torch.Tensor,
    lse: torch.Tensor,
    entropy: torch.Tensor | None,
    grad_log_prob: torch.Tensor | None,
    grad_entropy: torch.Tensor | None,
    temperature: float,
    inplace: bool,
) -> torch.Tensor:
    """The gradient ``(N, V)`` w.r.t. ``logits``, in their dtype; written over ``logits`` when ``inplace``."""
    triton, _, backward_kernel = _triton()
    rows, vocab = logits.shape
    grad = logits if inplace else torch.empty_like(logits, memory_format=torch.contiguous_format)
    if grad_entropy is not None and entropy is None:
        raise ValueError("an entropy gradient needs the forward's entropy")
    if rows and vocab:
        backward_kernel[(rows, triton.cdiv(vocab, BLOCK_V))](
            logits, grad, labels, lse,
            entropy if grad_entropy is not None else lse,
            grad_log_prob if grad_log_prob is not None else lse,
            grad_entropy if grad_entropy is not None else lse,
            logits.stride(0), grad.stride(0), vocab, 1.0 / temperature,
            TEMPERED=temperature != 1.0, LOG_PROB_GRAD=grad_log_prob is not None,
            ENTROPY_GRAD=grad_entropy is not None, BLOCK=BLOCK_V, num_warps=NUM_WARPS,
        )  # fmt: skip
    return grad

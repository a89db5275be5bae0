"""Token log-probabilities and entropies over a large vocabulary, a chunk of rows at a time.

For tempered logits ``z = logits / T`` of one row (``V`` entries) and its label ``y``::

    lse = logsumexp(z)        log p_j = z_j - lse        log_prob = log p_y        H = -sum_j p_j log p_j

and the gradients used by the backward passes (Bishop, PRML §4.3.4 for the softmax Jacobian)::

    d log_prob / d z_j = 1[j = y] - p_j            d H / d z_j = -p_j (log p_j + H)

Two entry points, both exact (only float32 summation order differs from a full ``log_softmax``):

* :func:`log_probs_from_logits` takes ``logits (N, V)`` the model already made and never holds more than one
  float32 chunk besides them; the backward writes the gradient into the logits' own storage. On CUDA it runs
  :mod:`verl.utils.triton_logprobs`' two kernels instead of chunks (one pass over the logits each way).
* :func:`log_probs_from_hidden` takes the last hidden states ``(N, H)`` and the output-layer weight ``(V, H)``:
  the ``(N, V)`` logits never exist at once, in forward or backward (each chunk's logits are recomputed in the
  backward pass, one extra ``N x H x V`` matmul for ``(N, V)`` of memory saved). This is the fused
  linear + log-prob + entropy head of verl's ``use_fused_kernels``.

Outputs are float32 ``(N,)`` (float64 for float64 inputs); ``entropy`` is None unless asked for.
"""

from __future__ import annotations

from functools import cache

import torch

from verl.utils import triton_logprobs

# float32 elements of one chunk of logits: 64 MiB on CPU; 512 MiB on GPU, where larger matmuls run faster
CHUNK_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 27}


def _reduction_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def rows_per_chunk(vocab_size: int, device: torch.device) -> int:
    """Rows of ``(rows, vocab_size)`` float32 logits that fit :data:`CHUNK_ELEMENTS` for ``device``."""
    budget = CHUNK_ELEMENTS.get(device.type, CHUNK_ELEMENTS["cpu"])
    return max(1, budget // max(1, vocab_size))


def _tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """A float32 (float64 for float64 input) copy of ``logits / temperature``: one pass, two when tempered."""
    out = logits.to(_reduction_dtype(logits.dtype), copy=True)
    return out.div_(temperature) if temperature != 1.0 else out


def _chunk_forward(logits: torch.Tensor, labels: torch.Tensor, temperature: float, with_entropy: bool):
    """``(log_prob (c,), entropy (c,) | None, lse (c,))`` of a chunk of logits ``(c, V)`` (any float dtype)."""
    tempered = _tempered(logits, temperature)
    lse = torch.logsumexp(tempered, dim=-1)
    log_prob = tempered.gather(1, labels.unsqueeze(1)).squeeze(1) - lse
    entropy = None
    if with_entropy:
        entropy = lse - torch.linalg.vecdot(torch.softmax(tempered, dim=-1), tempered, dim=-1)
    return log_prob, entropy, lse


def _chunk_backward(
    logits, labels, lse, entropy, grad_log_prob, grad_entropy, temperature: float, out_dtype=None, label_here=None
):
    """Gradient ``(c, V)`` w.r.t. a chunk of untempered ``logits`` (float32, or ``out_dtype``). Works in place on
    one float32 copy of the chunk: it becomes ``log p``, then ``p``, then the gradient. ``label_here (c,)`` (bool,
    a vocabulary split over ranks): rows whose label lies in these columns; the others get no ``1[j = y]`` term."""
    tempered = _tempered(logits, temperature)
    log_p = tempered.sub_(lse.unsqueeze(1))
    if grad_entropy is None:
        grad = log_p.exp_()  # p, in place: log p is not needed without the entropy term
        if grad_log_prob is not None:
            grad.mul_((-grad_log_prob).unsqueeze(1))
        else:
            grad.zero_()
    else:
        probs = torch.exp(log_p)
        grad = probs * (-grad_log_prob).unsqueeze(1) if grad_log_prob is not None else torch.zeros_like(probs)
        grad.sub_(log_p.add_(entropy.unsqueeze(1)).mul_(probs).mul_(grad_entropy.unsqueeze(1)))
    if grad_log_prob is not None:
        label_grad = grad_log_prob if label_here is None else torch.where(label_here, grad_log_prob, 0.0)
        grad.scatter_add_(1, labels.unsqueeze(1), label_grad.unsqueeze(1))
    if temperature != 1.0:
        grad.div_(temperature)
    return grad if out_dtype is None else grad.to(out_dtype)


def _chunk_backward_into_logits(logits, labels, lse, entropy, grad_log_prob, grad_entropy, temperature: float):
    """:func:`_chunk_backward`'s gradient written over the chunk ``logits (c, V)`` itself, for the compiled path.
    The label term compares each column with the row's label instead of ``scatter_add_`` (same values: ``p (-g) +
    g`` at the label column either way), so inductor fuses read, gradient and the write back into the chunk's own
    storage into one pass over the chunk in its own dtype: no float32 ``(c, V)`` buffer and no separate copy."""
    log_p = _tempered(logits, temperature) - lse.unsqueeze(1)
    probs = torch.exp(log_p)
    grad = probs * (-grad_log_prob).unsqueeze(1) if grad_log_prob is not None else torch.zeros_like(probs)
    if grad_entropy is not None:
        grad = grad - (log_p + entropy.unsqueeze(1)) * probs * grad_entropy.unsqueeze(1)
    if grad_log_prob is not None:
        columns = torch.arange(logits.shape[1], device=logits.device)
        grad = torch.where(columns.unsqueeze(0) == labels.unsqueeze(1), grad + grad_log_prob.unsqueeze(1), grad)
    if temperature != 1.0:
        grad = grad / temperature
    logits.copy_(grad)


def logits_grad_by_chunks(
    chunk_backward,
    logits: torch.Tensor,
    labels: torch.Tensor,
    lse: torch.Tensor,
    entropy: torch.Tensor | None,
    grad_log_prob: torch.Tensor | None,
    grad_entropy: torch.Tensor | None,
    temperature: float,
    chunk_rows: int,
    inplace: bool,
    out_dtype=None,
    label_here: torch.Tensor | None = None,
) -> torch.Tensor:
    """The gradient ``(T, V)`` w.r.t. ``logits``, ``chunk_rows`` rows at a time through ``chunk_backward``
    (:func:`_chunk_backward` or its compiled form), written into the logits' own storage when ``inplace``.
    ``label_here`` (a vocabulary split over ranks): rows whose label lies in this rank's columns."""
    grad_logits = logits if inplace else torch.empty_like(logits)
    for start in range(0, logits.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        extra = {} if label_here is None else {"label_here": label_here[rows]}
        grad = chunk_backward(
            logits[rows],
            labels[rows],
            lse[rows],
            entropy[rows] if entropy is not None else None,
            grad_log_prob[rows] if grad_log_prob is not None else None,
            grad_entropy[rows] if grad_entropy is not None else None,
            temperature,
            out_dtype,
            **extra,
        )
        grad_logits[rows].copy_(grad)
    return grad_logits


@cache
def _compiled(fn):
    """``torch.compile`` of a chunk function: one fused kernel instead of a pass over the chunk per op."""
    return torch.compile(fn, dynamic=True)


def _chunk_fns(compiled: bool):
    if compiled:
        return _compiled(_chunk_forward), _compiled(_chunk_backward)
    return _chunk_forward, _chunk_backward


class _LogProbsFromLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, temperature: float, with_entropy: bool, chunk_rows: int, compiled: bool):
        ctx.set_materialize_grads(False)
        ctx.temperature, ctx.chunk_rows, ctx.compiled = temperature, chunk_rows, compiled
        # the backward writes into the logits' storage, which only this function reads (the model made them)
        ctx.inplace = not logits.is_leaf
        ctx.triton = triton_logprobs.usable(logits)
        if ctx.triton:  # CUDA: one pass over the logits each way, no float32 chunk (verl.utils.triton_logprobs)
            log_prob, entropy, lse = triton_logprobs.forward(logits, labels, temperature, with_entropy)
            ctx.save_for_backward(logits, labels, lse, entropy)
            return log_prob, entropy
        chunk_forward, _ = _chunk_fns(compiled)
        num_rows = logits.shape[0]
        log_prob = torch.empty(num_rows, dtype=_reduction_dtype(logits.dtype), device=logits.device)
        lse = torch.empty_like(log_prob)
        entropy = torch.empty_like(log_prob) if with_entropy else None
        for start in range(0, num_rows, chunk_rows):
            rows = slice(start, start + chunk_rows)
            chunk = chunk_forward(logits[rows], labels[rows], temperature, with_entropy)
            log_prob[rows], chunk_entropy, lse[rows] = chunk
            if with_entropy:
                entropy[rows] = chunk_entropy
        ctx.save_for_backward(logits, labels, lse, entropy if with_entropy else None)
        return log_prob, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_log_prob, grad_entropy):
        logits, labels, lse, entropy = ctx.saved_tensors
        if ctx.triton:
            grads = (g.contiguous() if g is not None else None for g in (grad_log_prob, grad_entropy))
            grad = triton_logprobs.backward(logits, labels, lse, entropy, *grads, ctx.temperature, ctx.inplace)
            return grad, None, None, None, None, None
        if ctx.compiled and ctx.inplace:
            into_logits = _compiled(_chunk_backward_into_logits)
            for start in range(0, logits.shape[0], ctx.chunk_rows):
                rows = slice(start, start + ctx.chunk_rows)
                into_logits(
                    logits[rows], labels[rows], lse[rows], entropy[rows] if entropy is not None else None,
                    grad_log_prob[rows] if grad_log_prob is not None else None,
                    grad_entropy[rows] if grad_entropy is not None else None, ctx.temperature,
                )  # fmt: skip
            return logits, None, None, None, None, None
        _, chunk_backward = _chunk_fns(ctx.compiled)
        out_dtype = logits.dtype if ctx.compiled else None  # eager: the copy into the logits converts, saving a pass
        grad_logits = logits_grad_by_chunks(
            chunk_backward, logits, labels, lse, entropy, grad_log_prob, grad_entropy, ctx.temperature,
            ctx.chunk_rows, ctx.inplace, out_dtype,
        )  # fmt: skip
        return grad_logits, None, None, None, None, None


class _LogProbsFromHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, labels, temperature: float, with_entropy: bool, chunk_rows: int, compiled: bool):
        ctx.set_materialize_grads(False)
        chunk_forward, _ = _chunk_fns(compiled)
        num_rows = hidden.shape[0]
        log_prob = torch.empty(num_rows, dtype=_reduction_dtype(hidden.dtype), device=hidden.device)
        lse = torch.empty_like(log_prob)
        entropy = torch.empty_like(log_prob) if with_entropy else None
        for start in range(0, num_rows, chunk_rows):
            rows = slice(start, start + chunk_rows)
            logits = hidden[rows] @ weight.t()
            log_prob[rows], chunk_entropy, lse[rows] = chunk_forward(logits, labels[rows], temperature, with_entropy)
            if with_entropy:
                entropy[rows] = chunk_entropy
        ctx.save_for_backward(hidden, weight, labels, lse, entropy if with_entropy else None)
        ctx.temperature, ctx.chunk_rows, ctx.compiled = temperature, chunk_rows, compiled
        return log_prob, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_log_prob, grad_entropy):
        hidden, weight, labels, lse, entropy = ctx.saved_tensors
        _, chunk_backward = _chunk_fns(ctx.compiled)
        need_hidden, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=lse.dtype) if need_weight else None
        for start in range(0, hidden.shape[0], ctx.chunk_rows):
            rows = slice(start, start + ctx.chunk_rows)
            chunk_hidden = hidden[rows]
            grad = chunk_backward(
                chunk_hidden @ weight.t(),
                labels[rows],
                lse[rows],
                entropy[rows] if entropy is not None else None,
                grad_log_prob[rows] if grad_log_prob is not None else None,
                grad_entropy[rows] if grad_entropy is not None else None,
                ctx.temperature,
                hidden.dtype,
            )
            if need_hidden:
                grad_hidden[rows] = grad @ weight
            if need_weight:
                grad_weight += grad.t() @ chunk_hidden
        return grad_hidden, grad_weight.to(weight.dtype) if need_weight else None, None, None, None, None, None


def _check(rows: torch.Tensor, labels: torch.Tensor, temperature: float) -> None:
    if rows.dim() != 2 or labels.shape != rows.shape[:1]:
        raise ValueError(f"expected (N, D) inputs and (N,) labels; got {tuple(rows.shape)} and {tuple(labels.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")


def log_probs_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    chunk_rows: int | None = None,
    compiled: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log_prob (N,), entropy (N,) | None)`` of ``softmax(logits / temperature)`` at ``labels (N,)`` from
    ``logits (N, V)`` in any float dtype. The backward overwrites a non-leaf ``logits`` with its gradient.
    On CUDA two Triton kernels do it in one pass each way (:mod:`verl.utils.triton_logprobs`); elsewhere, chunks of
    rows, where ``compiled`` runs each chunk's math as ``torch.compile``-fused kernels."""
    _check(logits, labels, temperature)
    chunk_rows = chunk_rows or rows_per_chunk(logits.shape[1], logits.device)
    args = (logits, labels.long().contiguous(), float(temperature), calculate_entropy, chunk_rows, compiled)
    return _LogProbsFromLogits.apply(*args)


def log_probs_from_hidden(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    chunk_rows: int | None = None,
    compiled: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log_prob (N,), entropy (N,) | None)`` for ``logits = hidden (N, H) @ weight (V, H)^T`` without
    materialising the ``(N, V)`` logits; gradients flow to ``hidden`` and ``weight`` (float32-accumulated).
    ``compiled`` runs each chunk's math as ``torch.compile``-fused kernels."""
    _check(hidden, labels, temperature)
    if weight.dim() != 2 or weight.shape[1] != hidden.shape[1]:
        raise ValueError(f"weight {tuple(weight.shape)} does not match hidden {tuple(hidden.shape)}")
    chunk_rows = chunk_rows or rows_per_chunk(weight.shape[0], hidden.device)
    args = (hidden, weight, labels.long(), float(temperature), calculate_entropy, chunk_rows, compiled)
    return _LogProbsFromHidden.apply(*args)

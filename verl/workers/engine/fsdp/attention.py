"""Variable-length attention for packed sequences, registered with transformers as ``verl_varlen``.

A packed micro-batch ``(1, T)`` holds N sequences back to back; each must attend causally to itself only. The
boundaries travel as transformers' flash-attention keyword arguments, which every decoder layer forwards to its
attention function: ``cu_seq_lens_q/k (N + 1,) int32`` and ``max_length_q/k`` (see ``PackedBatch.attention_kwargs``).
No ``(T, T)`` mask is built. Kernels:

* CUDA (``VERL_PACKED_ATTENTION``, :data:`CUDA_KERNELS`; the default differs per engine, see
  :data:`DEFAULT_CUDA_KERNEL` and :data:`MEGATRON_CUDA_KERNEL`):

  - ``varlen`` (the FSDP engine's default): ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention-2 kernels
    inside torch, no padding). On one H200 (session 18, ``bench_gpu_update``, Qwen2.5-0.5B's shape, 64k packed
    tokens, compiled layers, fused AdamW) the update took 0.575 s against 0.694 s with ``padded_flash`` and 0.724 s
    with ``padded`` in the same call, at the same gradient norm (0.817 against 0.819). Where torch has no varlen
    attention (before 2.10), on a device older than Ampere, or for a head size or dtype (float32) FlashAttention-2
    does not take, the FSDP default falls back to ``padded_flash``. Not the Megatron engine's default:
    with torch 2.11 (H200) a Megatron TP=2 step whose packs held a few 2-11-token sequences got weight gradients
    far from float32's (grad norm 4.44 against 6.68, RMSNorm weight cosines down to -0.66; ``padded`` 6.61). Yet
    all 240 of its calls on both ranks, replayed, gave the right dq/dk/dv and exactly zero gradients on the head
    padding; alone on such packs it wrote nothing outside its own tensors; and a dummy sequence at the end of each
    pack left the step's gradients bit-identical. The cause is not found; see
    ``benchmarks/results/gpu_session11_2026-11-27.md``. In the FSDP engine session 10's parity run found no
    difference between the two kernels; its GPU test against the float32 reference
    (``tests/workers/engine/fsdp/test_engine_gpu.py``) runs this default.
  - ``padded_flash`` (the Megatron engine's default): the pack's sequences right-padded into one
    ``(N, H, max_len, D)`` batch and causal sdpa over it on the flash (else memory-efficient) backend; exact, since
    under a causal mask a sequence's trailing padding is attended by nothing but itself. Kept off cuDNN's sdpa
    backend, which torch 2.11 picks for this batch on an H100: its kernels are faster, but each call costs about
    1 ms of host time, and a small model's training phases are bound by the host. In the GRPO loop on one H100
    (SmolLM2-135M, session 14, with one micro-batch instead of two) the reference pass went from 0.40 to 0.20 s and
    the update from 1.02 to 0.59 s.
  - ``padded``: the same batch on whichever backend sdpa picks (cuDNN on an H100 with torch 2.11).
  - ``padded_jagged``: ``padded`` with torch's jagged <-> padded copy kernels instead of index tensors.
  - ``per_sequence``: the CPU kernel below.
* CPU: ``scaled_dot_product_attention`` per sequence (causal). The block-diagonal mask of the ``sdpa`` path makes
  the kernel compute every cross-sequence block and then mask it; this computes only the diagonal blocks.

A call without those arguments is delegated to transformers' ``sdpa`` function: generation (a KV cache and a
padding mask, built by the ``sdpa`` mask function registered under the same name), or a packed call that forgot
them, whose boundaries are then read from ``position_ids`` (restarting at 0), as transformers' flash path does.
"""

from __future__ import annotations

import inspect
import os
from functools import cache

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN_ATTENTION = "verl_varlen"


@cache
def _cuda_varlen_kernel():
    """``(varlen_attn, extra kwargs for a causal call)`` across torch versions (``is_causal`` in 2.10, a
    ``window_size`` of ``(-1, 0)`` later), or None when this torch has no varlen attention."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    params = inspect.signature(varlen_attn).parameters
    causal = {"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)}
    if "enable_gqa" in params:
        causal["enable_gqa"] = True
    return varlen_attn, causal, "scale" in params


_kv_heads_native: bool | None = None
"""Whether this torch's varlen kernel takes fewer key/value heads than query heads; learnt at the first call."""


def _cuda_varlen(query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
    """``(T, Hq, D)`` from ``query (T, Hq, D)``, ``key/value (T, Hkv, D)``."""
    global _kv_heads_native
    varlen_attn, causal, takes_scale = _cuda_varlen_kernel()
    if takes_scale:
        causal = {**causal, "scale": scaling}
    elif abs(scaling - query.shape[-1] ** -0.5) > 1e-12:  # older signature: fold a non-default scale into q
        query = query * (scaling * query.shape[-1] ** 0.5)
    groups = query.shape[1] // key.shape[1]
    if groups > 1 and _kv_heads_native is not False:
        try:
            out = varlen_attn(query, key, value, cu_seqlens, cu_seqlens, max_len, max_len, **causal)
            _kv_heads_native = True
            return out
        except RuntimeError:
            if _kv_heads_native:
                raise
            _kv_heads_native = False
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    return varlen_attn(query, key, value, cu_seqlens, cu_seqlens, max_len, max_len, **causal)


def _padded_sdpa(query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
    """``(T, Hq, D)`` from ``query (T, Hq, D)``, ``key/value (T, Hkv, D)``: the N packed sequences scattered into a
    right-padded ``(N, H, max_len, D)`` batch, causal sdpa (on the backend sdpa picks), and each
    sequence's rows gathered back. Padding rows follow their sequence's last token, so the causal mask keeps them out
    of every real row's output, and they receive a zero output gradient, so none reaches q, k or v. No host sync."""
    tokens, groups = query.shape[0], query.shape[1] // key.shape[1]  # out: (N, Hq, max_len, D) below
    num_seqs = cu_seqlens.numel() - 1
    starts = cu_seqlens[:-1].long()
    lengths = cu_seqlens[1:].long() - starts
    seq = torch.repeat_interleave(torch.arange(num_seqs, device=query.device), lengths, output_size=tokens)  # (T,)
    pos = torch.arange(tokens, device=query.device) - starts[seq]  # (T,) position within its sequence

    def padded(t: torch.Tensor) -> torch.Tensor:  # (T, H, D) -> (N, H, max_len, D)
        batch = t.new_zeros(num_seqs, max_len, t.shape[1], t.shape[2]).index_put((seq, pos), t)
        return batch.transpose(1, 2)

    q, k, v = padded(query), padded(key), padded(value)
    # enable_gqa: the flash backend reads each key/value head for its query group (no repeated copy)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=groups > 1)
    return out.transpose(1, 2)[seq, pos]


def _padded_flash_sdpa(query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
    """:func:`_padded_sdpa` kept off cuDNN's attention backend, which torch 2.11 picks for these inputs on an H100.
    cuDNN's kernels are the fastest on the device, but each call costs about 1 ms of host time (0.9-1.0 ms forward
    and backward, against 0.15 ms of kernel forward, in session 13's profile of the GRPO loop's SmolLM2 update): a
    small model's phases are then bound by the host. Flash, else memory-efficient, else math (CPU) attention."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    with sdpa_kernel(backends):
        return _padded_sdpa(query, key, value, cu_seqlens, max_len, scaling)


class _ToPadded(torch.autograd.Function):
    """``(T, F)`` packed rows -> ``(N, max_len, F)`` right-padded with zeros, one kernel each way
    (``aten._jagged_to_padded_dense_forward`` and its inverse, which have no autograd formula of their own)."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, offsets: torch.Tensor, max_len: int) -> torch.Tensor:
        ctx.save_for_backward(offsets)
        ctx.tokens = rows.shape[0]
        return torch.ops.aten._jagged_to_padded_dense_forward(rows, [offsets], [max_len], 0.0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (offsets,) = ctx.saved_tensors
        return torch.ops.aten._padded_dense_to_jagged_forward(grad.contiguous(), [offsets], ctx.tokens), None, None


class _FromPadded(torch.autograd.Function):
    """``(N, max_len, F)`` right-padded -> ``(T, F)`` packed rows, the padding dropped (:class:`_ToPadded` inverted)."""

    @staticmethod
    def forward(ctx, padded: torch.Tensor, offsets: torch.Tensor, tokens: int) -> torch.Tensor:
        ctx.save_for_backward(offsets)
        ctx.max_len = padded.shape[1]
        return torch.ops.aten._padded_dense_to_jagged_forward(padded.contiguous(), [offsets], tokens)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (offsets,) = ctx.saved_tensors
        padded = torch.ops.aten._jagged_to_padded_dense_forward(grad.contiguous(), [offsets], [ctx.max_len], 0.0)
        return padded, None, None


def _padded_jagged_sdpa(query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
    """:func:`_padded_sdpa` with the scatter into the padded batch and the gather back done by torch's jagged <->
    padded kernels (one launch each way, and the same in backward) instead of index tensors and ``index_put``."""
    tokens, groups = query.shape[0], query.shape[1] // key.shape[1]
    offsets = cu_seqlens.long()

    def padded(t: torch.Tensor) -> torch.Tensor:  # (T, H, D) -> (N, H, max_len, D)
        batch = _ToPadded.apply(t.reshape(tokens, -1), offsets, max_len)  # (N, max_len, H * D)
        return batch.view(batch.shape[0], max_len, t.shape[1], t.shape[2]).transpose(1, 2)

    out = F.scaled_dot_product_attention(
        padded(query), padded(key), padded(value), is_causal=True, scale=scaling, enable_gqa=groups > 1
    )  # (N, Hq, max_len, D)
    rows = _FromPadded.apply(out.transpose(1, 2).reshape(out.shape[0], max_len, -1), offsets, tokens)
    return rows.view(tokens, query.shape[1], query.shape[2])


def _cpu_varlen(query, key, value, cu_seqlens, scaling: float) -> torch.Tensor:
    """``(T, Hq, D)`` from ``(T, H, D)`` inputs: causal sdpa over each sequence's own tokens."""
    bounds = cu_seqlens.tolist()
    gqa = query.shape[1] != key.shape[1]
    outs = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end == start:
            continue
        q, k, v = (t[start:end].transpose(0, 1) for t in (query, key, value))  # (H, len, D)
        outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=gqa))
    return torch.cat(outs, dim=1).transpose(0, 1)


CUDA_KERNELS = {
    "varlen": _cuda_varlen,
    "padded": _padded_sdpa,
    "padded_jagged": _padded_jagged_sdpa,
    "padded_flash": _padded_flash_sdpa,
    "per_sequence": lambda q, k, v, cu_seqlens, max_len, scaling: _cpu_varlen(q, k, v, cu_seqlens, scaling),
}
"""Packed causal attention kernels for half-precision CUDA tensors, chosen by ``VERL_PACKED_ATTENTION``."""
DEFAULT_CUDA_KERNEL = "varlen"
"""The FSDP engine's kernel when ``VERL_PACKED_ATTENTION`` is unset (``padded_flash`` where it cannot run)."""
MEGATRON_CUDA_KERNEL = "padded_flash"
"""The Megatron engine's kernel when ``VERL_PACKED_ATTENTION`` is unset (``varlen``'s unexplained TP=2 gradients)."""


def _cuda_capability() -> tuple[int, int]:
    """The current CUDA device's compute capability ((0, 0) without one)."""
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)


@torch.compiler.assume_constant_result  # read inside compiled decoder layers: called once there, a constant after
def _varlen_runs_here() -> bool:
    """Whether this torch has the varlen kernel and the device is Ampere or newer (FlashAttention-2's kernels)."""
    return _cuda_varlen_kernel() is not None and _cuda_capability() >= (8, 0)


def _varlen_default_fits(head_dim: int | None, dtype: torch.dtype | None) -> bool:
    """Whether a ``varlen`` default may run here (:func:`_varlen_runs_here`) for this head size and dtype
    (FlashAttention-2 takes a multiple of 8, at most 256, in fp16 or bf16). Else the default is ``padded_flash``,
    whose sdpa falls back to the memory-efficient or math kernel where flash cannot run (a V100 or T4, say, or a
    float32 model)."""
    if dtype is not None and dtype not in (torch.float16, torch.bfloat16):
        return False
    return _varlen_runs_here() and (head_dim is None or (head_dim % 8 == 0 and head_dim <= 256))


def cuda_kernel(default: str = DEFAULT_CUDA_KERNEL, head_dim: int | None = None, dtype: torch.dtype | None = None):
    """The CUDA kernel ``VERL_PACKED_ATTENTION`` names, else ``default``; a ``varlen`` default becomes
    ``padded_flash`` where it cannot run (:func:`_varlen_default_fits`; an explicitly named ``varlen`` is not
    replaced)."""
    name = os.environ.get("VERL_PACKED_ATTENTION")
    if name is None:
        name = default if default != "varlen" or _varlen_default_fits(head_dim, dtype) else "padded_flash"
    if name not in CUDA_KERNELS:
        raise ValueError(f"VERL_PACKED_ATTENTION={name!r}: choose one of {sorted(CUDA_KERNELS)}")
    if name == "varlen" and _cuda_varlen_kernel() is None:
        raise ValueError(
            "VERL_PACKED_ATTENTION=varlen needs torch.nn.attention.varlen (torch >= 2.10); use padded_flash (default)"
        )
    return CUDA_KERNELS[name]


def _on_cuda_kernel(default: str, query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
    """``(T, Hq, D)`` from the CUDA kernel :func:`cuda_kernel` picks for ``query (T, Hq, D)``'s head size and dtype."""
    kernel = cuda_kernel(default, query.shape[-1], query.dtype)
    return kernel(query.contiguous(), key.contiguous(), value.contiguous(), cu_seqlens, max_len, scaling)


def packed_causal_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_len: int,
    scaling: float,
    default_kernel: str = DEFAULT_CUDA_KERNEL,
) -> torch.Tensor:
    """``(T, Hq, D)`` causal attention of each packed sequence over its own tokens from ``query (T, Hq, D)`` and
    ``key/value (T, Hkv, D)``: the :data:`CUDA_KERNELS` entry ``VERL_PACKED_ATTENTION`` names (else
    ``default_kernel``) for half-precision CUDA tensors, else sdpa per sequence (also used by the Megatron engine's
    attention, :mod:`verl.models.mcore.attention`, with :data:`MEGATRON_CUDA_KERNEL`)."""
    if query.is_cuda and query.dtype in (torch.float16, torch.bfloat16):
        return _on_cuda_kernel(default_kernel, query, key, value, cu_seqlens, max_len, scaling)
    return _cpu_varlen(query, key, value, cu_seqlens, scaling)


def cu_seqlens_from_position_ids(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(cu_seqlens (N + 1,) int32, max_len)`` of a packed ``(1, T)`` row whose positions restart at 0."""
    flat = position_ids.reshape(-1)
    starts = torch.nonzero(flat == 0).flatten()
    total = torch.tensor([flat.numel()], device=flat.device)
    cu_seqlens = torch.cat([starts, total]).to(torch.int32)
    return cu_seqlens, int((cu_seqlens[1:] - cu_seqlens[:-1]).max())


def _packed_without_kwargs(query, key, attention_mask, kwargs) -> bool:
    position_ids = kwargs.get("position_ids")
    if attention_mask is not None or position_ids is None or query.shape[0] != 1:
        return False
    if query.shape[2] != key.shape[2] or query.shape[2] < 2:
        return False
    return bool((position_ids.reshape(-1)[1:] == 0).any())


def _boundary_error(module: torch.nn.Module, boundary: str, tokens: int) -> ValueError:
    return ValueError(
        f"verl_varlen attention in {type(module).__name__} got packed sequence boundaries (cu_seq_lens_q) that do "
        f"not fit this call ({boundary}, {tokens} tokens): they were meant for another call, e.g. the text pack's "
        "boundaries reaching a vision tower (see packing.keep_text_boundaries_out_of_encoders)"
    )


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: ``query (1, Hq, T, D)``, ``key/value (1, Hkv, T, D)`` ->
    ``(1, T, Hq, D)``."""
    cu_seqlens, max_len = kwargs.get("cu_seq_lens_q"), kwargs.get("max_length_q")
    if cu_seqlens is None and _packed_without_kwargs(query, key, attention_mask, kwargs):
        cu_seqlens, max_len = cu_seqlens_from_position_ids(kwargs["position_ids"])
    if cu_seqlens is None or attention_mask is not None or query.shape[0] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    if dropout and module.training:
        raise ValueError("verl_varlen attention has no dropout; set attention_dropout to 0 in override_config")
    if kwargs.get("is_causal", getattr(module, "is_causal", True)) is False:  # the kernels here are causal
        raise _boundary_error(module, "a non-causal call", query.shape[2])
    scaling = scaling if scaling is not None else query.shape[-1] ** -0.5
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (T, H, D)
    if q.is_cuda:
        # a full cu_seqlens check would sync the device every layer; a too-long sequence costs nothing to catch
        if int(max_len) > q.shape[0]:
            raise _boundary_error(module, f"max_length_q={int(max_len)}", q.shape[0])
        out = _on_cuda_kernel(DEFAULT_CUDA_KERNEL, q, k, v, cu_seqlens, int(max_len), scaling)
    else:
        if int(cu_seqlens[-1]) != q.shape[0]:
            raise _boundary_error(module, f"cu_seq_lens_q[-1]={int(cu_seqlens[-1])}", q.shape[0])
        out = _cpu_varlen(q, k, v, cu_seqlens, scaling)
    return out.unsqueeze(0), None


def _register() -> None:
    def varlen_mask(*args, attention_mask=None, q_length=None, kv_length=None, **kwargs):
        """No mask for a padding-free call (the boundaries come as kwargs); sdpa's mask otherwise."""
        if attention_mask is None and q_length == kv_length:
            return None
        return sdpa_mask(*args, attention_mask=attention_mask, q_length=q_length, kv_length=kv_length, **kwargs)

    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN_ATTENTION, varlen_mask)


_register()

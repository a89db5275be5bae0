"""The packed causal attention kernels of :data:`verl.workers.engine.fsdp.attention.CUDA_KERNELS` on one GPU, in bf16:
dq/dk/dv against float32 per-sequence attention (relative norm error) and forward+backward time, per pack shape.

Shapes: Megatron TP=2's per-rank micro-batches of issue 16 (6 query / 2 key-value heads, two short sequences and a
one-token padding sequence), and training packs of the GRPO workloads (SmolLM2's 9/3 heads, Qwen2.5-0.5B's 14/2,
head dim 64, lengths drawn from a fixed seed).

    python3 -m benchmarks.gpu.packed_attention [--kernels varlen,padded] [--repeats 20]
    python3 -m benchmarks.gpu.packed_attention --guard [--kernels varlen,varlen_tail,padded]

``--guard`` asks whether a kernel writes memory it does not own (issue 16: torch 2.11's ``varlen_attn`` is right call
by call, yet Megatron TP=2's weight gradients come out wrong). Before the calls it fills the caching allocator's
pools with sentinel tensors of mixed sizes and frees a random half of them, so the kernel's outputs and temporaries
land between sentinels; afterwards it counts the sentinel elements that changed. ``varlen_tail`` is ``varlen`` with
the pack's token count rounded up to a multiple of 128 by a trailing dummy sequence of 128-255 tokens
(:func:`tail_padded`): if the kernel's last block writes past the pack's end, that lands in the dummy rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random

import torch

SHAPES = {
    "tp2_short": ((6, 2), [4, 6, 1]),
    "tp2_mixed": ((6, 2), [11, 2, 9, 4, 1]),
    # rank 1 of Megatron TP=2 on head-padded SmolLM2: the last key/value head and its query group all-zero
    "tp2_short_zero": ((6, 2), [4, 6, 1]),
    "tp2_mixed_zero": ((6, 2), [11, 2, 9, 4, 1]),
    "smollm2_grpo_16k": ((9, 3), "100-512:16384"),
    "qwen05b_16k": ((14, 2), "64-1024:16384"),
    "qwen05b_uniform_16k": ((14, 2), "1024-1024:16384"),
}
"""name -> ((query heads, key/value heads), lengths, or ``"lo-hi:tokens"`` for lengths drawn until ``tokens``).
A ``_zero`` shape zeroes the last key/value head, its query heads and their output gradient, as head padding is;
its row adds the largest gradient the kernel gives those heads (exactly 0 in exact arithmetic)."""


def lengths(spec) -> list[int]:
    if isinstance(spec, list):
        return spec
    bounds, total = spec.split(":")
    lo, hi = (int(x) for x in bounds.split("-"))
    rng, lens = random.Random(0), []
    while sum(lens) < int(total):
        lens.append(min(rng.randint(lo, hi), int(total) - sum(lens)))
    return lens


def tail_padded(kernel, multiple: int = 128):
    """``kernel`` over the pack extended by a dummy sequence of zeros, at least ``multiple`` tokens long, to a token
    count divisible by ``multiple``: the pack's last block is then full, and the dummy is whole blocks of its own up
    to its last one. The dummy rows' output is dropped, so they get no gradient and change no real row (each
    sequence attends itself only)."""

    def padded_kernel(query, key, value, cu_seqlens, max_len: int, scaling: float) -> torch.Tensor:
        tokens = query.shape[0]
        extra = multiple + (-tokens % multiple)
        q, k, v = (torch.cat([t, t.new_zeros(extra, *t.shape[1:])]) for t in (query, key, value))
        cu = torch.cat([cu_seqlens, cu_seqlens.new_tensor([tokens + extra])])
        return kernel(q, k, v, cu, max(max_len, extra), scaling)[:tokens]

    return padded_kernel


def use_kernel(name: str) -> None:
    """Make this process's packed attention (``VERL_PACKED_ATTENTION``) the kernel ``name``, registering a
    benchmark-side ``<kernel>_tail`` variant (:func:`tail_padded`) in ``CUDA_KERNELS`` first."""
    from verl.workers.engine.fsdp import attention

    if name not in attention.CUDA_KERNELS:
        attention.CUDA_KERNELS[name] = kernel_named(name)
    os.environ["VERL_PACKED_ATTENTION"] = name


def kernel_named(name: str):
    from verl.workers.engine.fsdp.attention import CUDA_KERNELS

    if name.endswith("_tail"):
        return tail_padded(CUDA_KERNELS[name.removesuffix("_tail")])
    return CUDA_KERNELS[name]


SENTINEL = 1234.5


def sentinels(seed: int, count: int = 3000, device: str = "cuda") -> list[torch.Tensor]:
    """``count`` float32 tensors of 128 .. 256K elements (512 B .. 1 MiB, both allocator pools) filled with
    :data:`SENTINEL`; a random half is freed again, leaving holes between the returned rest."""
    rng = random.Random(seed)
    sizes = [128 * 2 ** rng.randint(0, 11) for _ in range(count)]
    made = [torch.full((n,), SENTINEL, device=device) for n in sizes]
    return [t for t in made if rng.random() < 0.5]


def guard_check(kernel_name: str, heads, lens, rounds: int = 20, device: str = "cuda") -> dict:
    """Sentinel elements changed by ``rounds`` forward+backward calls of the kernel (see ``--guard``)."""
    kernel = kernel_named(kernel_name)
    guards = sentinels(seed=len(lens), device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    changed_after = {}
    for step in range(rounds):
        q, k, v = (torch.randn(sum(lens), h, 64, device=device, generator=gen).to(dtype).requires_grad_()
                   for h in (heads[0], heads[1], heads[1]))  # fmt: skip
        out = kernel(q, k, v, cu, max(lens), 0.125)
        out.backward(torch.randn_like(out))
        if step in (0, rounds - 1):
            if device == "cuda":
                torch.cuda.synchronize()
            changed_after[step + 1] = sum(int((t != SENTINEL).sum()) for t in guards)
    return {
        "kernel": kernel_name,
        "seqs": len(lens),
        "tokens": sum(lens),
        "guard_elements": sum(t.numel() for t in guards),
        "changed_after_calls": changed_after,
    }


def measure(kernel_name: str, heads, lens, repeats: int, zero_last_group: bool = False) -> dict:
    from tests.workers.engine.fsdp.test_attention import _per_sequence_attention

    kernel = kernel_named(kernel_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(sum(lens), h, 64, device="cuda", generator=gen).bfloat16().requires_grad_()
               for h in (heads[0], heads[1], heads[1]))  # fmt: skip
    grad_out = torch.randn(sum(lens), heads[0], 64, device="cuda", generator=gen).bfloat16()
    zero_q = list(range(heads[0] - heads[0] // heads[1], heads[0])) if zero_last_group else []
    if zero_last_group:
        with torch.no_grad():
            q[:, zero_q], k[:, -1], v[:, -1] = 0, 0, 0
        grad_out[:, zero_q] = 0
    out = kernel(q, k, v, cu, max(lens), 0.125)
    out.backward(grad_out)
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref_out = _per_sequence_attention(*ref_in, lens, 0.125)  # float32, key/value heads repeated
    ref_out.backward(grad_out.float())
    row = {"kernel": kernel_name, "seqs": len(lens), "tokens": sum(lens), "max_len": max(lens), "heads": list(heads)}
    row["out"] = float((out.detach().float() - ref_out.detach()).norm() / ref_out.detach().norm())
    for name, got, ref in zip("qkv", (q, k, v), ref_in, strict=True):
        row[f"d{name}"] = round(float((got.grad.float() - ref.grad).norm() / ref.grad.norm()), 5)
    if zero_last_group:
        on_zero_heads = (q.grad[:, zero_q], k.grad[:, -1], v.grad[:, -1], out.detach()[:, zero_q])
        row["zero_head_grad_max"] = max(float(t.abs().max()) for t in on_zero_heads)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(q, k, v, cu, max(lens), 0.125).backward(grad_out)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    row["fwd_bwd_ms"] = round(sorted(times)[len(times) // 2], 3)
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="varlen,padded")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--guard", action="store_true", help="count sentinel writes instead of errors and time")
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes.split(","):
        heads, spec = SHAPES[shape]
        for kernel in args.kernels.split(","):
            try:
                if args.guard:
                    row = {"shape": shape, **guard_check(kernel, heads, lengths(spec), args.repeats)}
                else:
                    row = measure(kernel, heads, lengths(spec), args.repeats, zero_last_group=shape.endswith("_zero"))
                    row = {"shape": shape, **row}
            except Exception as exc:  # a kernel that fails on a shape is a result too
                row = {"shape": shape, "kernel": kernel, "error": f"{type(exc).__name__}: {exc}"[:400]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    main()

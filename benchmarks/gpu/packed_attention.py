"""The packed causal attention kernels of :data:`verl.workers.engine.fsdp.attention.CUDA_KERNELS` on one GPU, in bf16:
dq/dk/dv against float32 per-sequence attention (relative norm error) and forward+backward time, per pack shape.

Shapes: Megatron TP=2's per-rank micro-batches of issue 16 (6 query / 2 key-value heads, two short sequences and a
one-token padding sequence), and training packs of the GRPO workloads (SmolLM2's 9/3 heads, Qwen2.5-0.5B's 14/2,
head dim 64, lengths drawn from a fixed seed).

    python3 -m benchmarks.gpu.packed_attention [--kernels varlen,padded] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import random

import torch

SHAPES = {
    "tp2_short": ((6, 2), [4, 6, 1]),
    "tp2_mixed": ((6, 2), [11, 2, 9, 4, 1]),
    "smollm2_grpo_16k": ((9, 3), "100-512:16384"),
    "qwen05b_16k": ((14, 2), "64-1024:16384"),
    "qwen05b_uniform_16k": ((14, 2), "1024-1024:16384"),
}
"""name -> ((query heads, key/value heads), lengths, or ``"lo-hi:tokens"`` for lengths drawn until ``tokens``)."""


def lengths(spec) -> list[int]:
    if isinstance(spec, list):
        return spec
    bounds, total = spec.split(":")
    lo, hi = (int(x) for x in bounds.split("-"))
    rng, lens = random.Random(0), []
    while sum(lens) < int(total):
        lens.append(min(rng.randint(lo, hi), int(total) - sum(lens)))
    return lens


def measure(kernel_name: str, heads, lens, repeats: int) -> dict:
    from tests.workers.engine.fsdp.test_attention import _per_sequence_attention
    from verl.workers.engine.fsdp.attention import CUDA_KERNELS

    kernel = CUDA_KERNELS[kernel_name]
    gen = torch.Generator(device="cuda").manual_seed(0)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(sum(lens), h, 64, device="cuda", generator=gen).bfloat16().requires_grad_()
               for h in (heads[0], heads[1], heads[1]))  # fmt: skip
    grad_out = torch.randn(sum(lens), heads[0], 64, device="cuda", generator=gen).bfloat16()
    out = kernel(q, k, v, cu, max(lens), 0.125)
    out.backward(grad_out)
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref_out = _per_sequence_attention(*ref_in, lens, 0.125)  # float32, key/value heads repeated
    ref_out.backward(grad_out.float())
    row = {"kernel": kernel_name, "seqs": len(lens), "tokens": sum(lens), "max_len": max(lens), "heads": list(heads)}
    row["out"] = float((out.detach().float() - ref_out.detach()).norm() / ref_out.detach().norm())
    for name, got, ref in zip("qkv", (q, k, v), ref_in, strict=True):
        row[f"d{name}"] = round(float((got.grad.float() - ref.grad).norm() / ref.grad.norm()), 5)
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
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes.split(","):
        heads, spec = SHAPES[shape]
        for kernel in args.kernels.split(","):
            try:
                row = {"shape": shape, **measure(kernel, heads, lengths(spec), args.repeats)}
            except Exception as exc:  # a kernel that fails on a shape is a result too
                row = {"shape": shape, "kernel": kernel, "error": f"{type(exc).__name__}: {exc}"[:400]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    main()

"""The weight sync's gather of FSDP2 shards on two ranks: one ``full_tensor`` a tensor (the path before session 29)
against one collective a bucket (:mod:`verl.workers.engine.fsdp.full_gather`), in the same processes, same model.

A random-weight model with SmolLM2-135M's shape (30 layers, hidden 576, 273 tensors) is built from its config,
fully sharded over two ranks (gloo on CPU; NCCL when the machine has two GPUs), and its whole state dict is taken in
bf16, as the rollout's weight sync takes it, ``--repeats`` times each way, alternating. Both ways must give equal
tensors. Prints the median seconds of each and their ratio.

    python -m benchmarks.bench_weight_gather [--repeats 5] [--layers 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from tests.workers.engine.fsdp.distributed import run_on_ranks


def smollm2_shaped(layers: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers, num_attention_heads=9,
        num_key_value_heads=3, tie_word_embeddings=True, max_position_embeddings=2048,
    )  # fmt: skip


def _per_tensor(module, dtype):
    """The path before session 29: one ``full_tensor`` per tensor (``in_buckets`` only batches what it yields)."""
    from torch.distributed.tensor import DTensor

    from verl.workers.engine.fsdp.full_gather import full_tensor

    out = []
    for name, tensor in module.state_dict().items():
        out.append((name, full_tensor(tensor, dtype)))
        assert not isinstance(out[-1][1], DTensor)
    return out


def _on_ranks(rank, world, layers, repeats):
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM

    from verl.utils.device import get_device_name
    from verl.workers.engine.fsdp.weights import iter_full_state_dict

    device = get_device_name()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(smollm2_shaped(layers)).to(device)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)

    def sync(fn):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, out

    times = {"per_tensor": [], "bucketed": []}
    for _ in range(repeats + 1):  # the first round warms both up and is not counted
        seconds_old, old = sync(lambda: _per_tensor(model, torch.bfloat16))
        seconds_new, new = sync(lambda: list(iter_full_state_dict(model, dtype=torch.bfloat16)))
        times["per_tensor"].append(seconds_old)
        times["bucketed"].append(seconds_new)
    equal = [n for n, _ in old] == [n for n, _ in new] and all(
        torch.equal(a, b) for (_, a), (_, b) in zip(old, new, strict=True)
    )
    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (gloo)",
        "tensors": len(new),
        "bytes": sum(t.numel() * t.element_size() for _, t in new),
        "equal": equal,
        "per_tensor": times["per_tensor"][1:],
        "bucketed": times["bucketed"][1:],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=30)
    args = parser.parse_args(argv if argv is not None else [])
    results = run_on_ranks(_on_ranks, 2, args.layers, args.repeats)
    first = results[0]
    # a sync is as slow as its slowest rank
    old = statistics.median(max(r["per_tensor"][i] for r in results) for i in range(args.repeats))
    new = statistics.median(max(r["bucketed"][i] for r in results) for i in range(args.repeats))
    print(
        f"SmolLM2-shaped, {args.layers} layers, {first['tensors']} tensors, {first['bytes'] / 2**20:.0f} MiB in bf16, "
        f"FSDP2 over 2 ranks on {first['device']}; median of {args.repeats}"
    )
    print(f"  one full_tensor a tensor:  {old * 1e3:8.1f} ms")
    print(f"  one collective a bucket:   {new * 1e3:8.1f} ms   ({old / new:.2f}x faster)")
    print(f"  same tensors both ways: {all(r['equal'] for r in results)}")
    if not all(r["equal"] for r in results):
        raise SystemExit("the two gathers differ")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

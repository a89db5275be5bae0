"""The bucketed gather of FSDP2 shards on two gloo ranks, against the tensors every rank built before sharding: uneven
splits (a rank with fewer rows, a rank with none), 1-D and 3-D tensors, a bf16 cast, tensors that are not row-sharded
in between, and the number of collectives the buckets take (counted by hand)."""

from __future__ import annotations

import torch

from tests.workers.engine.fsdp.distributed import run_on_ranks

SHAPES = {"a": (7, 3), "b": (1, 5), "c": (4,), "d": (6, 2, 3), "e": (5, 4)}
"""Row-sharded over two ranks: ``a`` splits 4 + 3 rows, ``b`` 1 + 0, ``e`` 3 + 2."""


def _tensors() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    whole = {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}
    whole["ids"] = torch.arange(6, dtype=torch.int64)
    whole["norm"] = torch.randn(3, generator=gen)
    whole["plain"] = torch.randn(2, 2, generator=gen)
    return whole


def _on_ranks(rank, world, bucket_bytes, dtype):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    from verl.workers.engine.fsdp import full_gather

    mesh = init_device_mesh("cpu", (world,))
    whole = _tensors()
    # a, b | ids (int64, its own bucket) | norm (replicated) | c, d, e | plain (not a DTensor)
    sharded = {name: distribute_tensor(whole[name], mesh, [Shard(0)]) for name in ["a", "b", "ids", "c", "d", "e"]}
    order = ["a", "b", "ids", "norm", "c", "d", "e", "plain"]
    pairs = []
    for name in order:
        if name == "norm":
            pairs.append((name, distribute_tensor(whole[name], mesh, [Replicate()])))
        else:
            pairs.append((name, sharded.get(name, whole[name])))
    local_rows = {name: tensor.to_local().shape[0] for name, tensor in sharded.items()}

    calls = {"collectives": 0, "all_gather": 0, "full_tensor": 0}
    coalescing, all_gather, to_full = dist._coalescing_manager, dist.all_gather_into_tensor, DTensor.full_tensor

    def counted_coalescing(*args, **kwargs):
        calls["collectives"] += 1
        return coalescing(*args, **kwargs)

    def counted_all_gather(*args, **kwargs):
        calls["all_gather"] += 1
        return all_gather(*args, **kwargs)

    def counted_full_tensor(self, *args, **kwargs):
        calls["full_tensor"] += 1
        return to_full(self, *args, **kwargs)

    dist._coalescing_manager = counted_coalescing  # this spawned process only
    dist.all_gather_into_tensor = counted_all_gather
    DTensor.full_tensor = counted_full_tensor
    out = list(full_gather.iter_full_tensors(pairs, bucket_bytes, dtype))
    return {"out": out, "calls": calls, "local_rows": local_rows}


def _expected(dtype):
    whole = _tensors()
    order = ["a", "b", "ids", "norm", "c", "d", "e", "plain"]
    return [
        (name, whole[name].to(dtype) if dtype is not None and whole[name].is_floating_point() else whole[name])
        for name in order
    ]


def test_one_collective_per_bucket_gives_every_whole_tensor_in_order():
    # bucket_bytes=1 MiB holds everything: buckets [a, b] (cut by ids), [ids] (int64, cut by norm), [c, d, e]
    results = run_on_ranks(_on_ranks, 2, 1 << 20, None)
    expected = _expected(None)
    assert results[0]["local_rows"] == {"a": 4, "b": 1, "ids": 3, "c": 2, "d": 3, "e": 3}
    assert results[1]["local_rows"] == {"a": 3, "b": 0, "ids": 3, "c": 2, "d": 3, "e": 2}
    for result in results:
        assert [name for name, _ in result["out"]] == [name for name, _ in expected]
        for (name, got), (_, want) in zip(result["out"], expected, strict=True):
            assert got.dtype == want.dtype and torch.equal(got, want), name
        # six row-sharded tensors in three collectives; the replicated norm is already whole
        assert result["calls"] == {"collectives": 3, "all_gather": 6, "full_tensor": 0}


def test_small_buckets_and_a_bf16_cast():
    # 40 bytes a bucket in bf16: a (21 elements, 42 B) fills one alone; b (10 B) is cut by ids (int64, 48 B, alone);
    # c (8 B) + d (72 B) fill the next; e (40 B) fills its own: 5 collectives
    results = run_on_ranks(_on_ranks, 2, 40, torch.bfloat16)
    expected = _expected(torch.bfloat16)
    for result in results:
        for (name, got), (_, want) in zip(result["out"], expected, strict=True):
            assert got.dtype == want.dtype and torch.equal(got, want), name
        assert result["calls"]["collectives"] == 5

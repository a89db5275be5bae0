"""verl.protocol's helpers: serialisation round trips, batch folding, auto-padding chunks and the all-gather of a
DataProto over gloo ranks (compared with the plain concatenation of every rank's rows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tensordict import TensorDict

from verl import DataProto
from verl.protocol import (
    DataProtoConfig,
    all_gather_data_proto,
    deserialize_single_tensor,
    deserialize_tensordict,
    fold_batch_dim,
    serialize_single_tensor,
    serialize_tensordict,
    unfold_batch_dim,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_single_tensor_round_trip(dtype):
    tensor = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    name, shape, data = serialize_single_tensor(tensor)
    assert name == str(dtype).removeprefix("torch.") and shape == (3, 4) and data.dtype == np.uint8
    restored = deserialize_single_tensor((name, shape, data))
    assert restored.dtype == dtype and torch.equal(restored, tensor)


def test_tensordict_round_trip_with_a_nested_tensor():
    rows = [torch.tensor([1, 2]), torch.tensor([3]), torch.tensor([4, 5, 6])]
    batch = TensorDict(
        {"x": torch.randn(3, 2), "ids": torch.nested.as_nested_tensor(rows, layout=torch.jagged)}, batch_size=[3]
    )
    restored = deserialize_tensordict(serialize_tensordict(batch))
    assert torch.equal(restored["x"], batch["x"]) and restored.batch_size == torch.Size([3])
    assert [r.tolist() for r in restored["ids"].unbind()] == [[1, 2], [3], [4, 5, 6]]


def test_fold_then_unfold_is_the_identity():
    data = DataProto.from_dict(tensors={"x": torch.arange(6).unsqueeze(-1)}, non_tensors={"s": list("abcdef")})
    folded = fold_batch_dim(data, 2)
    assert folded.batch["x"].shape == (2, 3, 1) and folded.non_tensor_batch["s"].shape == (2, 3)
    assert folded.non_tensor_batch["s"][1].tolist() == ["d", "e", "f"]
    back = unfold_batch_dim(folded, 2)
    assert torch.equal(back.batch["x"], data.batch["x"]) and back.non_tensor_batch["s"].tolist() == list("abcdef")
    with pytest.raises(ValueError, match="not divisible"):
        fold_batch_dim(data, 4)


def test_auto_padding_allows_uneven_chunks(monkeypatch):
    data = DataProto.from_dict(tensors={"x": torch.arange(10)})
    with pytest.raises(ValueError, match="not divisible"):
        data.chunk(4)
    padded = DataProto.from_dict(tensors={"x": torch.arange(10)}, auto_padding=True)
    assert [len(c) for c in padded.chunk(4)] == [3, 3, 3, 1]  # torch.chunk sizes
    DataProtoConfig.auto_padding = True
    try:
        assert [len(c) for c in data.chunk(4)] == [3, 3, 3, 1]
    finally:
        DataProtoConfig.auto_padding = False
    monkeypatch.setenv("VERL_AUTO_PADDING", "1")
    assert DataProtoConfig.auto_padding is True


def _gather_worker(rank: int, world: int, port: int, queue) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    data = DataProto.from_dict(
        tensors={"x": torch.full((rank + 1, 2), float(rank))}, non_tensors={"who": [f"r{rank}"] * (rank + 1)}
    )
    all_gather_data_proto(data)
    queue.put((rank, data.batch["x"].tolist(), data.non_tensor_batch["who"].tolist()))
    dist.destroy_process_group()


def test_all_gather_data_proto_over_gloo():
    """Rank r holds r + 1 rows of value r; afterwards every rank holds all rows in rank order."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=_gather_worker, args=(r, 2, port, queue)) for r in range(2)]
    for p in processes:
        p.start()
    results = sorted(queue.get(timeout=120) for _ in processes)
    for p in processes:
        p.join(timeout=60)
    expected_x = [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert results == [(0, expected_x, ["r0", "r1", "r1"]), (1, expected_x, ["r0", "r1", "r1"])]

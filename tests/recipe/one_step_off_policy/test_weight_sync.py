"""The trainer-to-rollout weight broadcast: bucket plans, and a real 3-member gloo broadcast over TCP (members are
threads: the group is a standalone ProcessGroupGloo, so it needs no per-process default group, and threads spare the
spawn of three interpreters; the end-to-end recipe test broadcasts across Ray worker processes)."""

from __future__ import annotations

import queue as queue_module
import socket
import threading

import pytest
import torch

from recipe.one_step_off_policy.weight_sync import (
    TensorInfo,
    WeightSyncGroup,
    plan_buckets,
    receive_weights,
    send_weights,
    weights_info,
)

NAMED = [
    ("embed.weight", torch.arange(12, dtype=torch.float32).view(3, 4)),
    ("norm.weight", torch.ones(4, dtype=torch.bfloat16)),
    ("head.bias", torch.full((5,), 7.0)),
    ("head.weight", torch.linspace(-1, 1, 6).view(2, 3)),
]


def test_plan_buckets_groups_consecutive_tensors_of_one_dtype_up_to_the_budget():
    infos = weights_info(NAMED)  # 48, 8 (bf16), 20, 24 bytes
    assert [info.nbytes for info in infos] == [48, 8, 20, 24]
    assert plan_buckets(infos, bucket_bytes=64) == [[0], [1], [2, 3]]
    assert plan_buckets(infos, bucket_bytes=40) == [[0], [1], [2], [3]]
    assert plan_buckets(infos, bucket_bytes=1 << 20) == [[0], [1], [2, 3]]


def test_a_tensor_larger_than_the_budget_gets_its_own_bucket():
    infos = [TensorInfo("a", (4,), torch.float32), TensorInfo("b", (100,), torch.float32)]
    assert plan_buckets(infos, bucket_bytes=32) == [[0], [1]]


def _member(rank: int, port: int, queue) -> None:
    try:
        group = WeightSyncGroup("127.0.0.1", port, rank, 3, "gloo", timeout_s=120)
        infos = weights_info(NAMED)
        if rank == 0:
            queue.put((rank, send_weights(group, iter(NAMED), infos, bucket_bytes=32)))
        else:
            received = receive_weights(group, infos, "cpu", bucket_bytes=32)
            queue.put((rank, {name: (tensor.dtype, tensor.tolist()) for name, tensor in received.items()}))
    except Exception as error:  # surfaced by the test thread instead of a silent queue timeout
        queue.put((rank, error))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_broadcast_reaches_every_rollout_rank_bit_for_bit():
    queue = queue_module.Queue()
    port = _free_port()
    members = [threading.Thread(target=_member, args=(rank, port, queue), daemon=True) for rank in range(3)]
    for member in members:
        member.start()
    results = dict(queue.get(timeout=180) for _ in members)
    for member in members:
        member.join(timeout=60)
    for rank, result in results.items():
        assert not isinstance(result, Exception), f"member {rank} failed: {result!r}"
    assert results[0] == 48 + 8 + 20 + 24  # bytes sent
    for rank in (1, 2):
        for name, tensor in NAMED:
            dtype, values = results[rank][name]
            assert dtype == tensor.dtype and values == tensor.tolist()


def test_sender_rejects_a_model_that_changed_after_set_up():
    infos = weights_info(NAMED)
    changed = [NAMED[0], ("norm.weight", torch.ones(5, dtype=torch.bfloat16)), *NAMED[2:]]
    with pytest.raises(RuntimeError, match="norm.weight"):
        send_weights(None, iter(changed), infos)
    with pytest.raises(RuntimeError, match="beyond the 4 announced"):
        send_weights(None, iter([*NAMED, ("extra", torch.zeros(1))]), infos)

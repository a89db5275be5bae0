"""Statistics over two gloo ranks equal the same statistics of the concatenated data, computed with numpy."""

import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

RANK_DATA = [np.array([1.0, 4.0, -2.0]), np.array([3.0, 0.5])]
RANK_MASKS = [np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0])]


def _worker(rank: int, port: int, queue) -> None:
    from verl.utils.torch_functional import (
        allgather_dict_into_dict,
        distributed_masked_mean,
        distributed_mean_max_min_std,
    )

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    local = torch.tensor(RANK_DATA[rank], dtype=torch.float64)
    mean, high, low, std = distributed_mean_max_min_std(local)
    masked = distributed_masked_mean(local, torch.tensor(RANK_MASKS[rank], dtype=torch.float64))
    gathered = allgather_dict_into_dict({"loss": [rank, rank + 1], "grad_norm": float(rank)})
    queue.put((rank, float(mean), float(high), float(low), float(std), float(masked), gathered))
    dist.destroy_process_group()


def test_two_rank_statistics_match_numpy():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=_worker, args=(rank, port, queue)) for rank in range(2)]
    for p in processes:
        p.start()
    results = sorted(queue.get(timeout=180) for _ in processes)
    for p in processes:
        p.join(timeout=60)
    values = np.concatenate(RANK_DATA)
    masks = np.concatenate(RANK_MASKS)
    assert [r[0] for r in results] == [0, 1]
    for _rank, mean, high, low, std, masked, gathered in results:
        assert mean == pytest.approx(values.mean())
        assert (high, low) == (values.max(), values.min())
        assert std == pytest.approx(values.std(ddof=1))
        assert masked == pytest.approx((values * masks).sum() / masks.sum())
        assert gathered == {"loss": [[0, 1], [1, 2]], "grad_norm": [0.0, 1.0]}

"""Per-rank SFT batches: the ranks' slices tile the seeded global batch, and a restored stream continues."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from verl.trainer.sft.data import create_train_stream, create_val_loader


class Numbers(Dataset):
    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        return {"index": torch.tensor(index)}


def _batches(stream, count: int) -> list[list[int]]:
    out = []
    for batch in stream.iter_epochs(3):
        out.append(batch["index"].tolist())
        if len(out) == count:
            break
    return out


def test_rank_slices_tile_the_global_batch_and_resume():
    data = Numbers(12)
    streams = [create_train_stream(data, 6, True, seed=3, rank=r, world_size=2) for r in (0, 1)]
    per_rank = [_batches(stream, 6) for stream in streams]  # 3 epochs x 2 steps
    for step in range(6):
        assert len(per_rank[0][step]) == 3 and len(per_rank[1][step]) == 3
    for epoch in range(3):
        seen = [i for step in (2 * epoch, 2 * epoch + 1) for rank in (0, 1) for i in per_rank[rank][step]]
        assert sorted(seen) == list(range(12))  # each epoch covers every example once
    assert per_rank[0][0] + per_rank[1][0] != per_rank[0][2] + per_rank[1][2]  # reshuffled per epoch

    fresh = create_train_stream(data, 6, True, seed=3, rank=1, world_size=2)
    partial = _batches(fresh, 3)
    state = fresh.state_dict()
    resumed = create_train_stream(data, 6, True, seed=3, rank=1, world_size=2)
    resumed.load_state_dict(state)
    assert partial + _batches(resumed, 3) == per_rank[1]


def test_val_shares_are_equal_and_disjoint():
    loaders = [create_val_loader(Numbers(7), 2, rank, 2) for rank in (0, 1)]
    shares = [[i for batch in loader for i in batch["index"].tolist()] for loader in loaders]
    assert shares == [[0, 1, 2], [3, 4, 5]]

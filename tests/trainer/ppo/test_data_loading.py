"""The resumable training stream: a resumed stream continues with exactly the batches an uninterrupted one yields."""

from __future__ import annotations

import itertools

import torch
from torch.utils.data import DataLoader

from verl.trainer.ppo.data_loading import EpochBatchSampler, ResumableBatchStream


def _stream(num_samples=10, batch_size=3, shuffle=True, seed=7, epochs=2) -> ResumableBatchStream:
    sampler = EpochBatchSampler(num_samples, batch_size, shuffle=shuffle, seed=seed)
    loader = DataLoader(list(range(num_samples)), batch_sampler=sampler, collate_fn=lambda items: list(items))
    return ResumableBatchStream(loader, sampler, total_epochs=epochs)


def test_epochs_are_seeded_permutations_without_the_ragged_tail():
    batches = list(_stream())
    assert len(batches) == 6  # 3 full batches of 3 per epoch, 2 epochs
    for epoch in range(2):
        order = torch.randperm(10, generator=torch.Generator().manual_seed(7 + epoch)).tolist()
        assert batches[3 * epoch : 3 * epoch + 3] == [order[0:3], order[3:6], order[6:9]]


def test_unshuffled_order_is_the_identity():
    assert list(_stream(shuffle=False, epochs=1)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_resume_continues_where_the_saved_stream_stopped():
    reference = list(_stream())
    for consumed in range(len(reference)):
        first = _stream()
        list(itertools.islice(iter(first), consumed))
        state = first.state_dict()
        resumed = _stream()
        resumed.load_state_dict(state)
        assert list(resumed) == reference[consumed:], f"resume after {consumed} batches"

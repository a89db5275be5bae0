"""DAPO dynamic sampling: group filtering against hand-worked batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.dynamic_sampling import GroupFilterBatcher, informative_group_indices


def _scored(uids: list[str], scores: list[float]) -> DataProto:
    token_level_scores = torch.zeros(len(scores), 3)
    token_level_scores[:, -1] = torch.tensor(scores)
    return DataProto.from_dict(
        tensors={"token_level_scores": token_level_scores},
        non_tensors={"uid": np.array(uids, dtype=object), "acc": np.array(scores, dtype=object)},
    )


def test_informative_groups_drop_equal_reward_groups():
    uids = np.array(["a", "a", "b", "b", "c", "c"], dtype=object)
    values = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    assert informative_group_indices(uids, values) == ([0, 1], 1)


def test_disabled_batcher_passes_the_first_batch_through():
    batcher = GroupFilterBatcher(enable=False, metric="acc", max_num_gen_batches=0, target_groups=2, n=2)
    batch = _scored(["a", "a", "b", "b"], [1, 1, 0, 0])
    assert batcher.add(batch)
    assert len(batcher.result()) == 4


@pytest.mark.parametrize("metric", ["acc", "seq_reward", "seq_final_reward", "score"])
def test_batcher_samples_until_full_and_trims(metric):
    batcher = GroupFilterBatcher(enable=True, metric=metric, max_num_gen_batches=5, target_groups=2, n=2)
    assert not batcher.add(_scored(["a", "a", "b", "b"], [1, 1, 0, 1]))  # keeps b
    assert not batcher.add(_scored(["c", "c", "d", "d"], [0, 0, 1, 1]))  # keeps nothing
    assert batcher.add(_scored(["e", "e", "f", "f"], [0, 1, 1, 0]))  # keeps e and f -> 3 groups >= 2
    result = batcher.result()
    assert result.non_tensor_batch["uid"].tolist() == ["b", "b", "e", "e"]
    assert batcher.metrics() == {"train/num_gen_batches": 3.0}


def test_batcher_gives_up_after_max_num_gen_batches():
    batcher = GroupFilterBatcher(enable=True, metric="acc", max_num_gen_batches=2, target_groups=2, n=2)
    assert not batcher.add(_scored(["a", "a"], [1, 1]))
    with pytest.raises(RuntimeError, match="max_num_gen_batches=2"):
        batcher.add(_scored(["b", "b"], [0, 0]))


def test_unknown_metric_names_the_key():
    batcher = GroupFilterBatcher(enable=True, metric="accuracy", max_num_gen_batches=0, target_groups=1, n=2)
    with pytest.raises(KeyError, match="algorithm.filter_groups.metric='accuracy'"):
        batcher.add(_scored(["a", "a"], [1, 0]))

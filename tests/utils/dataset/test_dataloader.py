"""Resumable dataloader: saving its state mid-epoch and restoring it gives the same next batches."""

import pytest
from omegaconf import OmegaConf

from tests.utils.dataset.rows import make_row, write_jsonl
from verl.utils.dataset import RLHFDataset, create_rl_dataloader


@pytest.fixture(scope="module")
def dataset(tokenizer, tmp_path_factory):
    path = write_jsonl(
        [make_row(f"question {i}", index=i) for i in range(10)], tmp_path_factory.mktemp("d") / "d.jsonl"
    )
    return RLHFDataset(path, tokenizer, OmegaConf.create({"max_prompt_length": 48}))


def loader(dataset, seed=7, shuffle=True, batch_size=3):
    config = OmegaConf.create({"seed": seed, "shuffle": shuffle, "dataloader_num_workers": 0})
    return create_rl_dataloader(dataset, config, batch_size=batch_size, is_train=True)


def indices(batch) -> list[int]:
    return [int(i) for i in batch["index"]]


def take(iterator, n):
    return [indices(next(iterator)) for _ in range(n)]


def test_epoch_covers_dataset_once_and_depends_on_seed(dataset):
    epoch = [indices(b) for b in loader(dataset)]
    assert len(epoch) == 3  # 10 rows, batches of 3, last partial batch dropped
    flat = [i for b in epoch for i in b]
    assert len(set(flat)) == 9
    assert [indices(b) for b in loader(dataset)] == epoch  # same seed, same order
    assert [indices(b) for b in loader(dataset, seed=8)] != epoch
    assert [indices(b) for b in loader(dataset, shuffle=False)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_resume_mid_epoch_gives_the_same_next_batches(dataset):
    original = loader(dataset)
    iterator = iter(original)
    take(iterator, 2)
    state = original.state_dict()
    rest_of_epoch = take(iterator, 1)
    with pytest.raises(StopIteration):
        next(iterator)
    next_epoch = [indices(b) for b in original]

    resumed = loader(dataset)
    resumed.load_state_dict(state)
    assert [indices(b) for b in resumed] == rest_of_epoch
    assert [indices(b) for b in resumed] == next_epoch
    assert next_epoch != take(iter(loader(dataset)), 3)  # a new epoch is a new order


def test_resume_at_epoch_boundary(dataset):
    original = loader(dataset)
    list(original)
    state = original.state_dict()
    assert state["epoch"] == 1 and state["batches_consumed"] == 0
    expected = [indices(b) for b in original]
    resumed = loader(dataset)
    resumed.load_state_dict(state)
    assert [indices(b) for b in resumed] == expected


def test_mismatched_state_is_refused(dataset):
    state = loader(dataset).state_dict()
    with pytest.raises(ValueError, match="batch_size=3"):
        loader(dataset, batch_size=2).load_state_dict(state)


def test_validation_loader_keeps_order_and_last_batch(dataset):
    config = OmegaConf.create({"seed": 7})
    batches = [indices(b) for b in create_rl_dataloader(dataset, config, batch_size=4, is_train=False)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]

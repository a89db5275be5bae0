"""DataProto against a plain reference: a python list with one tuple per sample."""

from __future__ import annotations

import base64
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from verl.protocol import (
    DataProto,
    DataProtoItem,
    collate_fn,
    pad_dataproto_to_divisor,
    union_numpy_dict,
    union_tensor_dict,
    unpad_dataproto,
)

FAST = settings(max_examples=25, deadline=None)


def make_data(batch_size: int, seed: int = 0) -> DataProto:
    """A batch with an int tensor, a bf16 tensor, a string column and a dict column; row i is recognisable."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {
        "input_ids": torch.arange(batch_size * 3).reshape(batch_size, 3) + 1000 * seed,
        "old_log_probs": torch.randn(batch_size, 4, generator=generator).bfloat16(),
    }
    non_tensors = {
        "uid": [f"s{seed}-{i}" for i in range(batch_size)],
        "reward_model": [{"ground_truth": str(i), "style": "rule"} for i in range(batch_size)],
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info={"temperature": 1.0})


def rows(data: DataProto) -> list[tuple]:
    """The reference view: one hashable tuple per sample, from every tensor and non-tensor column."""
    out = []
    for i in range(len(data)):
        ids = tuple(data.batch["input_ids"][i].tolist())
        log_probs = tuple(data.batch["old_log_probs"][i].float().tolist())
        out.append((ids, log_probs, data.non_tensor_batch["uid"][i], str(data.non_tensor_batch["reward_model"][i])))
    return out


# ------------------------------------------------------------------------------------------------ construction


def test_from_dict_builds_aligned_parts():
    data = make_data(5)
    assert len(data) == 5
    assert data.batch.batch_size == torch.Size([5])
    assert data.non_tensor_batch["uid"].dtype == object
    assert data.non_tensor_batch["uid"].tolist() == [f"s0-{i}" for i in range(5)]
    assert data.meta_info == {"temperature": 1.0}


def test_from_dict_keeps_list_entries_as_objects():
    data = DataProto.from_dict(non_tensors={"tools": [[1, 2], [3, 4], [5, 6]]})
    assert data.non_tensor_batch["tools"].shape == (3,)
    assert data.non_tensor_batch["tools"][1] == [3, 4]
    assert len(data) == 3 and data.batch is None


def test_from_dict_names_mismatched_tensor_key_and_sizes():
    with pytest.raises(ValueError, match=r"'responses'.*\(3,\).*'prompts'.*\(4,\)"):
        DataProto.from_dict(tensors={"prompts": torch.zeros(4, 2), "responses": torch.zeros(3, 2)})


def test_non_tensor_length_mismatch_names_key_and_sizes():
    with pytest.raises(ValueError, match=r"'uid' has length 2.*has 4"):
        DataProto.from_dict(tensors={"prompts": torch.zeros(4, 2)}, non_tensors={"uid": ["a", "b"]})


def test_from_single_dict_splits_tensors_from_arrays():
    data = DataProto.from_single_dict({"x": torch.ones(2, 3), "uid": np.array(["a", "b"], dtype=object)})
    assert list(data.batch.keys()) == ["x"]
    assert data.non_tensor_batch["uid"].tolist() == ["a", "b"]
    with pytest.raises(TypeError, match="'bad'"):
        DataProto.from_single_dict({"x": torch.ones(2), "bad": 3})


def test_check_consistency_rejects_two_batch_dims_and_non_arrays():
    with pytest.raises(ValueError, match="one batch dim"):
        DataProto(batch=TensorDict({"x": torch.zeros(2, 3)}, batch_size=[2, 3]))
    with pytest.raises(TypeError, match="'uid'"):
        DataProto(batch=TensorDict({"x": torch.zeros(2)}, batch_size=[2]), non_tensor_batch={"uid": ["a", "b"]})


def test_empty_dataproto_has_length_zero():
    assert len(DataProto()) == 0


# ------------------------------------------------------------------------------------------------ indexing


def test_int_index_gives_item_with_row_values():
    data = make_data(4)
    item = data[2]
    assert isinstance(item, DataProtoItem)
    assert item.batch["input_ids"].tolist() == [6, 7, 8]
    assert item.non_tensor_batch["uid"] == "s0-2"
    assert data[-1].non_tensor_batch["uid"] == "s0-3"
    with pytest.raises(IndexError, match="4"):
        data[4]


@pytest.mark.parametrize(
    "index",
    [
        slice(1, 4),
        slice(None, None, 2),
        [3, 0, 0],
        np.array([2, 1]),
        torch.tensor([1, 3]),
        np.array([1, 0, 1, 0], bool),
    ],
)
def test_slices_and_index_arrays_match_list_indexing(index):
    data = make_data(4)
    reference = rows(data)
    if isinstance(index, slice):
        expected = reference[index]
    else:
        positions = np.nonzero(index)[0] if np.asarray(index).dtype == bool else np.asarray(index)
        expected = [reference[i] for i in positions]
    assert rows(data[index]) == expected


def test_collate_fn_stacks_items_back():
    data = make_data(3)
    assert rows(collate_fn([data[2], data[0]])) == [rows(data)[2], rows(data)[0]]


# ------------------------------------------------------------------------------------------------ keys


def test_select_keeps_named_keys_and_names_missing_ones():
    data = make_data(3)
    picked = data.select(batch_keys=["input_ids"], non_tensor_batch_keys=["uid"], meta_info_keys=[])
    assert list(picked.batch.keys()) == ["input_ids"]
    assert list(picked.non_tensor_batch) == ["uid"] and picked.meta_info == {}
    with pytest.raises(KeyError, match="'values'"):
        data.select(batch_keys=["values"])
    with pytest.raises(KeyError, match="'extra_info'"):
        data.select(non_tensor_batch_keys=["extra_info"])


def test_select_deepcopy_does_not_share_storage():
    data = make_data(3)
    copied = data.select(deepcopy=True)
    copied.batch["input_ids"][0, 0] = -1
    assert data.batch["input_ids"][0, 0] == 0


def test_pop_removes_keys_and_returns_them():
    data = make_data(3)
    popped = data.pop(batch_keys=["old_log_probs"], non_tensor_batch_keys=["uid"], meta_info_keys=["temperature"])
    assert list(popped.batch.keys()) == ["old_log_probs"] and len(popped) == 3
    assert list(popped.non_tensor_batch) == ["uid"] and popped.meta_info == {"temperature": 1.0}
    assert list(data.batch.keys()) == ["input_ids"]
    assert list(data.non_tensor_batch) == ["reward_model"] and data.meta_info == {}
    with pytest.raises(KeyError, match="'old_log_probs'"):
        data.pop(batch_keys=["old_log_probs"])


def test_rename_moves_tensor():
    data = make_data(2)
    data.rename("old_log_probs", "ref_log_prob")
    assert "ref_log_prob" in data.batch.keys() and "old_log_probs" not in data.batch.keys()


def test_union_adds_keys_and_accepts_equal_duplicates():
    data = make_data(3)
    other = DataProto.from_dict(
        tensors={"input_ids": data.batch["input_ids"].clone(), "values": torch.ones(3, 4)},
        non_tensors={"uid": list(data.non_tensor_batch["uid"]), "extra_info": [{"i": i} for i in range(3)]},
        meta_info={"temperature": 1.0, "eos_token_id": 2},
    )
    data.union(other)
    assert set(data.batch.keys()) == {"input_ids", "old_log_probs", "values"}
    assert set(data.non_tensor_batch) == {"uid", "reward_model", "extra_info"}
    assert data.meta_info == {"temperature": 1.0, "eos_token_id": 2}


@pytest.mark.parametrize(
    ("other_kwargs", "key"),
    [
        ({"tensors": {"input_ids": torch.zeros(3, 3, dtype=torch.long)}}, "input_ids"),
        ({"non_tensors": {"uid": ["x", "y", "z"]}}, "uid"),
        ({"meta_info": {"temperature": 0.5}}, "temperature"),
    ],
)
def test_union_refuses_conflicting_values_naming_the_key(other_kwargs, key):
    with pytest.raises(ValueError, match=key):
        make_data(3).union(DataProto.from_dict(**other_kwargs))


def test_union_helpers_compare_nan_as_equal_and_check_batch_size():
    left = {"score": np.array([1.0, np.nan], dtype=object)}
    union_numpy_dict(left, {"score": np.array([1.0, np.nan], dtype=object)})
    with pytest.raises(ValueError, match="batch sizes differ"):
        union_tensor_dict(TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"b": torch.zeros(3)}, [3]))


# ------------------------------------------------------------------------------------------------ split / join


@FAST
@given(num_chunks=st.integers(1, 5), rows_per_chunk=st.integers(0, 4), seed=st.integers(0, 3))
def test_chunk_then_concat_is_identity(num_chunks, rows_per_chunk, seed):
    data = make_data(num_chunks * rows_per_chunk, seed)
    parts = data.chunk(num_chunks)
    assert [len(p) for p in parts] == [rows_per_chunk] * num_chunks
    assert rows(DataProto.concat(parts)) == rows(data)
    assert all(p.meta_info == data.meta_info for p in parts)


@FAST
@given(split_size=st.integers(1, 4), num_parts=st.integers(1, 4))
def test_split_gives_consecutive_parts(split_size, num_parts):
    data = make_data(split_size * num_parts)
    reference = rows(data)
    parts = data.split(split_size)
    assert [rows(p) for p in parts] == [reference[i : i + split_size] for i in range(0, len(reference), split_size)]


def test_chunk_and_split_name_both_numbers_when_not_divisible():
    data = make_data(10)
    with pytest.raises(ValueError, match=r"10.*4 chunks"):
        data.chunk(4)
    with pytest.raises(ValueError, match=r"10.*split_size 3"):
        data.split(3)


def test_concat_names_differing_keys():
    with pytest.raises(ValueError, match="old_log_probs"):
        DataProto.concat([make_data(2), make_data(2).select(batch_keys=["input_ids"])])


@FAST
@given(batch_size=st.integers(1, 6), times=st.integers(1, 4))
def test_repeat_interleave_and_tile_orders(batch_size, times):
    data = make_data(batch_size)
    reference = rows(data)
    assert rows(data.repeat(times, interleave=True)) == [row for row in reference for _ in range(times)]
    assert rows(data.repeat(times, interleave=False)) == reference * times


def test_sample_level_repeat_uses_per_row_counts():
    data = make_data(3)
    reference = rows(data)
    assert rows(data.sample_level_repeat([2, 0, 1])) == [reference[0], reference[0], reference[2]]


@FAST
@given(batch_size=st.integers(1, 8), seed=st.integers(0, 100))
def test_reorder_then_inverse_permutation_restores(batch_size, seed):
    data = make_data(batch_size)
    reference = rows(data)
    permutation = np.random.default_rng(seed).permutation(batch_size)
    data.reorder(torch.from_numpy(permutation))
    assert rows(data) == [reference[i] for i in permutation]
    data.reorder(np.argsort(permutation))
    assert rows(data) == reference


def test_reorder_names_wrong_length():
    with pytest.raises(ValueError, match=r"2 indices.*batch of 3"):
        make_data(3).reorder([0, 1])


@FAST
@given(batch_size=st.integers(1, 9), divisor=st.integers(1, 6))
def test_pad_then_unpad_round_trips(batch_size, divisor):
    data = make_data(batch_size)
    reference = rows(data)
    padded, pad_size = pad_dataproto_to_divisor(data, divisor)
    assert len(padded) % divisor == 0 and pad_size == len(padded) - batch_size < divisor
    assert rows(padded) == reference + [reference[i % batch_size] for i in range(pad_size)]
    assert rows(unpad_dataproto(padded, pad_size)) == reference


def test_make_iterator_covers_every_row_each_epoch_reproducibly():
    data = make_data(6)
    reference = sorted(rows(data))
    first = [rows(mb) for mb in data.make_iterator(2, epochs=2, seed=7, dataloader_kwargs={"shuffle": True})]
    second = [rows(mb) for mb in data.make_iterator(2, epochs=2, seed=7, dataloader_kwargs={"shuffle": True})]
    assert first == second and len(first) == 6 and all(len(mb) == 2 for mb in first)
    assert sorted(sum(first[:3], [])) == reference and sorted(sum(first[3:], [])) == reference
    in_order = [rows(mb) for mb in data.make_iterator(3, epochs=1)]
    assert in_order == [rows(data)[:3], rows(data)[3:]]
    with pytest.raises(ValueError, match=r"6.*mini_batch_size 4"):
        data.make_iterator(4, epochs=1)


# ------------------------------------------------------------------------------------------------ transport


def test_to_device_moves_tensors():
    data = make_data(2).to("meta")
    assert data.batch["input_ids"].device.type == "meta"


@FAST
@given(batch_size=st.integers(0, 5), seed=st.integers(0, 3))
def test_pickle_round_trip_keeps_values_and_dtypes(batch_size, seed):
    data = make_data(batch_size, seed)
    restored = pickle.loads(pickle.dumps(data, protocol=5))
    assert rows(restored) == rows(data) and restored.meta_info == data.meta_info
    for key in data.batch.keys():
        assert restored.batch[key].dtype == data.batch[key].dtype
        assert torch.equal(restored.batch[key], data.batch[key])


def test_pickle_handles_non_contiguous_and_tensor_free_batches():
    data = DataProto.from_dict(tensors={"t": torch.arange(12).reshape(3, 4).T.contiguous().T})
    assert torch.equal(pickle.loads(pickle.dumps(data)).batch["t"], torch.arange(12).reshape(3, 4))
    only_objects = DataProto.from_dict(non_tensors={"uid": ["a", "b"]})
    assert pickle.loads(pickle.dumps(only_objects)).non_tensor_batch["uid"].tolist() == ["a", "b"]


# ``pickle.dumps(DataProto.from_dict(tensors={"ids": [[1, 2], [3, 4]] (int64), "lp": [[0.5, -1.25], [2.0, 0.0]]
# (bf16)}, non_tensors={"uid": ["a", "b"]}, meta_info={"temperature": 0.7}), protocol=4)`` as written by the
# single-file verl/protocol.py (commit 77c5a7e): saved DataProtos must keep loading after refactors.
PICKLED_BEFORE_SPLIT = (
    "gASVAAIAAAAAAACMDXZlcmwucHJvdG9jb2yUjAlEYXRhUHJvdG+Uk5QpgZR9lCiMBWJhdGNolH2UKIwKYmF0Y2hfc2l6ZZRdlEsCYYwGZGV2aWNl"
    "lE6MB2NvbHVtbnOUfZQojANpZHOUjBZudW1weS5fY29yZS5tdWx0aWFycmF5lIwMX3JlY29uc3RydWN0lJOUjAVudW1weZSMB25kYXJyYXmUk5RL"
    "AIWUQwFilIeUUpQoSwFLAksChpRoEIwFZHR5cGWUk5SMAmk4lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGKJQyABAAAAAAAAAAIAAAAA"
    "AAAAAwAAAAAAAAAEAAAAAAAAAJR0lGKMBWludDY0lIaUjAJscJRoD2gSSwCFlGgUh5RSlChLAUsCSwKGlGgZjAJpMpSJiIeUUpQoSwNoHU5OTkr/"
    "////Sv////9LAHSUYolDCAA/oL8AQAAAlHSUYowIYmZsb2F0MTaUhpR1dYwQbm9uX3RlbnNvcl9iYXRjaJR9lIwDdWlklGgPaBJLAIWUaBSHlFKU"
    "KEsBSwKFlGgZjAJPOJSJiIeUUpQoSwOMAXyUTk5OSv////9K/////0s/dJRiiV2UKIwBYZSMAWKUZXSUYnOMCW1ldGFfaW5mb5R9lIwLdGVtcGVy"
    "YXR1cmWURz/mZmZmZmZmc3ViLg=="
)


def test_a_dataproto_pickled_by_an_earlier_release_loads():
    data = pickle.loads(base64.b64decode(PICKLED_BEFORE_SPLIT))
    assert type(data) is DataProto and DataProto.__module__ == "verl.protocol"
    assert torch.equal(data.batch["ids"], torch.tensor([[1, 2], [3, 4]]))
    assert data.batch["lp"].dtype == torch.bfloat16
    assert data.batch["lp"].float().tolist() == [[0.5, -1.25], [2.0, 0.0]]
    assert data.non_tensor_batch["uid"].tolist() == ["a", "b"] and data.meta_info == {"temperature": 0.7}
    again = pickle.loads(pickle.dumps(data))
    assert torch.equal(again.batch["lp"], data.batch["lp"]) and again.non_tensor_batch["uid"].tolist() == ["a", "b"]


def test_save_and_load_from_disk(tmp_path):
    data = make_data(4)
    path = tmp_path / "batch.pkl"
    data.save_to_disk(str(path))
    loaded = DataProto.load_from_disk(str(path))
    assert rows(loaded) == rows(data) and loaded.meta_info == data.meta_info

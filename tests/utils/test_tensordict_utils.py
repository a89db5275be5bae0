"""verl.utils.tensordict_utils: per-row python values and batch-wide metadata travel with the tensors."""

import pytest
import torch

from verl.utils import tensordict_utils as tu


def _td():
    return tu.get_tensordict(
        {"x": torch.arange(3), "turns": [[], [0.5, 0.8], [{"acc": 1.0}]]}, non_tensor_dict={"temperature": 0.7}
    )


def test_get_pop_and_assign():
    td = _td()
    assert td.batch_size == torch.Size([3])
    assert tu.get(td, "turns") == [[], [0.5, 0.8], [{"acc": 1.0}]]
    assert tu.get(td, "temperature") == 0.7 and tu.get_non_tensor_data(td, "temperature", None) == 0.7
    assert tu.get(td, "missing", "default") == "default"
    tu.assign_non_tensor(td, flag=True, names=["a", "b", "c"])
    assert tu.get(td, "flag") is True and tu.get(td, "names") == ["a", "b", "c"]
    assert tu.pop(td, "names") == ["a", "b", "c"] and "names" not in td.keys()
    with pytest.raises(ValueError, match="rows"):
        tu.get_tensordict({"x": torch.arange(3), "y": [1, 2]})


def test_index_select_concat_and_keys():
    td = _td()
    picked = tu.index_select_tensor_dict(td, [2, 0])
    assert picked["x"].tolist() == [2, 0] and tu.get(picked, "turns") == [[{"acc": 1.0}], []]
    assert tu.get(picked, "temperature") == 0.7
    nested = tu.get_tensordict(
        {"ids": torch.nested.as_nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)}
    )
    joined = tu.concat_tensordict([nested, nested])
    assert [len(r) for r in joined["ids"].unbind()] == [2, 3, 2, 3]
    sub = tu.get_keys(td, ["x", "temperature"])
    assert set(sub.keys()) == {"x", "temperature"} and tu.get(sub, "temperature") == 0.7
    padded, pad = tu.pad_to_divisor(tu.get_tensordict({"x": torch.arange(3)}), 2)
    assert pad == 1 and padded["x"].tolist() == [0, 1, 2, 0] and tu.unpad(padded, pad)["x"].tolist() == [0, 1, 2]
    tu.assert_tensordict_eq(td, _td())

"""Properties of prompt truncation and left padding."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl.utils.dataset.padding import left_pad, truncate_ids

ids_lists = st.lists(st.integers(min_value=0, max_value=1000), max_size=60)


@given(ids=ids_lists, max_length=st.integers(min_value=1, max_value=40))
def test_truncation_keeps_the_promised_tokens(ids, max_length):
    keep = min(len(ids), max_length)
    left, right, middle = (truncate_ids(ids, max_length, mode) for mode in ("left", "right", "middle"))
    assert left == ids[len(ids) - keep :] and right == ids[:keep]
    assert len(middle) == keep
    if len(ids) > max_length:
        head = max_length // 2
        assert middle[:head] == ids[:head] and middle[head:] == ids[len(ids) - (max_length - head) :]
    else:
        assert middle == ids == truncate_ids(ids, max_length, "error")


@given(ids=st.lists(st.integers(min_value=3, max_value=1000), max_size=30), extra=st.integers(0, 10))
def test_left_pad_puts_ids_last_and_counts_positions(ids, extra):
    max_length = len(ids) + extra
    if max_length == 0:
        return
    input_ids, attention_mask, position_ids = left_pad(ids, max_length, pad_token_id=2)
    assert input_ids.tolist() == [2] * extra + ids
    assert attention_mask.tolist() == [0] * extra + [1] * len(ids)
    assert position_ids.tolist() == [0] * extra + list(range(len(ids)))


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="data.truncation"):
        truncate_ids([1, 2, 3], 2, "sideways")

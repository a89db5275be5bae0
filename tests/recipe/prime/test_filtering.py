"""PRIME's prompt selection against hand-worked cases."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from recipe.prime.filtering import select_prompt_rows

UIDS = np.array(["a", "a", "b", "b", "c", "c"], dtype=object)
ACC = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])  # group means 0.5, 1.0, 0.5


def _config(filter_accuracy=True, filter_truncate=False, max_response_length=10):
    return SimpleNamespace(
        filter_accuracy=filter_accuracy,
        accuracy_lower_bound=0.2,
        accuracy_upper_bound=0.8,
        filter_truncate=filter_truncate,
        max_response_length=max_response_length,
    )


def test_passing_prompts_come_first_in_draw_order():
    rows, metrics = select_prompt_rows(ACC, np.full(6, 3), UIDS, 2, _config())
    assert rows.tolist() == [0, 1, 4, 5]
    assert metrics["prime/filter_pass_rate"] == pytest.approx(2 / 3)
    rows, _ = select_prompt_rows(ACC, np.full(6, 3), UIDS, 3, _config())
    assert rows.tolist() == [0, 1, 4, 5, 2, 3]


def test_without_filters_the_first_prompts_are_kept():
    rows, metrics = select_prompt_rows(ACC, np.full(6, 3), UIDS, 2, _config(filter_accuracy=False))
    assert rows.tolist() == [0, 1, 2, 3]
    assert metrics["prime/filter_pass_rate"] == 1.0


def test_truncated_groups_are_demoted():
    lengths = np.array([3, 9, 3, 3, 2, 2])  # a response of group a reached max_response_length - 1
    rows, _ = select_prompt_rows(ACC, lengths, UIDS, 1, _config(filter_accuracy=False, filter_truncate=True))
    assert rows.tolist() == [2, 3]


def test_keeping_more_prompts_than_drawn_fails():
    with pytest.raises(ValueError, match="cannot keep 4 prompts"):
        select_prompt_rows(ACC, np.full(6, 3), UIDS, 4, _config())

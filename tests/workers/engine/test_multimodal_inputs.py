"""Per-sample multimodal inputs: the check that names a response holding a vision placeholder id."""

import pytest
import torch

from verl.workers.engine.multimodal_inputs import check_response_placeholders

IMAGE, VIDEO = 151655, 151656


def test_placeholder_in_a_masked_response_position_is_ignored():
    responses = torch.tensor([[5, 6, IMAGE], [7, 8, 9]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])  # the placeholder sits in padding
    check_response_placeholders(responses, mask, [IMAGE, VIDEO])
    check_response_placeholders(responses, torch.ones_like(mask), [])  # a text model has no placeholder ids


def test_first_placeholder_is_named_with_row_position_and_count():
    responses = torch.tensor([[5, 6, 7], [7, VIDEO, 9], [IMAGE, 1, 2]])
    with pytest.raises(ValueError, match=rf"row 1 holds the vision placeholder id {VIDEO} at response position 1 \(2 "):
        check_response_placeholders(responses, torch.ones_like(responses), [IMAGE, VIDEO])

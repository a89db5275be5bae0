"""M-RoPE position ids against transformers' own ``get_rope_index`` and a hand-worked example."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from tests.support.models import tiny_vlm_path
from verl.models.transformers.qwen2_vl import get_rope_index, mrope_position_ids, packed_model_position_ids


def test_hand_worked_example():
    # text(2) | image grid (1, 4, 2) with merge 2 -> 2x1 tokens | text(1) | video (2, 2, 2), time scale 3 -> 2x1x1
    ids = torch.tensor([5, 6, 9, 9, 7, 8, 8])
    positions = mrope_position_ids(
        ids, image_token_id=9, video_token_id=8, spatial_merge_size=2,
        image_grid_thw=torch.tensor([[1, 4, 2]]), video_grid_thw=torch.tensor([[2, 2, 2]]), video_time_scales=[3.0],
    )  # fmt: skip
    expected = torch.tensor(
        [
            [0, 1, 2, 2, 4, 5, 8],  # temporal: video frames at 5 + 0 and 5 + 3
            [0, 1, 2, 3, 4, 5, 5],  # height: image rows 0, 1
            [0, 1, 2, 2, 4, 5, 5],
        ]
    )
    assert torch.equal(positions, expected)


def test_padding_and_mismatched_grids():
    ids = torch.tensor([0, 0, 5, 9, 6])
    mask = torch.tensor([0, 0, 1, 1, 1])
    grid = torch.tensor([[1, 2, 2]])
    positions = mrope_position_ids(ids, 9, 8, 2, image_grid_thw=grid, attention_mask=mask)
    assert torch.equal(positions, torch.tensor([[0, 0, 0, 1, 2]]).expand(3, -1))
    with pytest.raises(ValueError, match="placeholder"):
        mrope_position_ids(ids, 9, 8, 2, image_grid_thw=torch.tensor([[1, 4, 2]]), attention_mask=mask)


@pytest.mark.parametrize("arch", ["qwen2_vl", "qwen2_5_vl"])
def test_matches_transformers_get_rope_index(arch):
    from transformers import AutoModelForImageTextToText

    from verl.utils import hf_processor

    path = tiny_vlm_path(arch)
    processor = hf_processor(path)
    model = AutoModelForImageTextToText.from_pretrained(path)
    images = [Image.new("RGB", (64, 100), "red"), Image.new("RGB", (112, 56), "blue")]
    content = [{"type": "text", "text": "a b"}, {"type": "image"}, {"type": "text", "text": "and"}, {"type": "image"}]
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    inputs = processor(text=[text], images=images, return_tensors="pt")
    reference, _ = model.model.get_rope_index(
        inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )
    ours = get_rope_index(processor, inputs["input_ids"][0], image_grid_thw=inputs["image_grid_thw"])
    assert torch.equal(ours, reference[:, 0])


def test_packed_positions_prepend_per_sequence_text_positions():
    packed = torch.tensor([[0, 1, 1, 5, 0, 3]]).expand(3, -1).unsqueeze(1)  # (3, 1, 6): sequences of 4 and 2
    out = packed_model_position_ids(packed, torch.tensor([0, 4, 6]))
    assert out.shape == (4, 1, 6)
    assert out[0, 0].tolist() == [0, 1, 2, 3, 0, 1]
    assert torch.equal(out[1:], packed)

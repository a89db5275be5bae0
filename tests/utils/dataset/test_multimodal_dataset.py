"""RLHFDataset with images through a tiny Qwen2-VL processor: expanded ids, collapsed engine ids, M-RoPE ids,
per-row media inputs, and the errors for mismatched markers, missing processors and cuts into images."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from tests.support.models import smollm2_path, tiny_vlm_path
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.utils.dataset.row_reading import write_parquet


def _png(color: str, size=(56, 56)) -> dict:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def _row(content: str, images: list) -> dict:
    return {
        "data_source": "shapes_count",
        "prompt": [{"role": "user", "content": content}],
        "images": images,
        "reward_model": {"style": "rule", "ground_truth": "1"},
    }


@pytest.fixture(scope="module")
def processor():
    from verl.utils import hf_processor

    return hf_processor(tiny_vlm_path("qwen2_vl"))


def _dataset(tmp_path, rows, processor, **config):
    path = str(tmp_path / "rows.parquet")
    write_parquet(rows, path)
    tokenizer = (
        processor.tokenizer
        if processor is not None
        else __import__("transformers").AutoTokenizer.from_pretrained(smollm2_path())
    )
    return RLHFDataset(path, tokenizer, {"max_prompt_length": 48, **config}, processor=processor)


def test_item_layout(tmp_path, processor):
    image_file = tmp_path / "blue.png"
    Image.new("RGB", (112, 56), "blue").save(image_file)
    dataset = _dataset(
        tmp_path, [_row("<image>count <image>", [_png("red"), {"bytes": None, "path": str(image_file)}])], processor
    )
    item = dataset[0]
    pad = processor.image_token_id
    ids = item["input_ids"][item["attention_mask"].bool()].tolist()
    assert ids.count(pad) == 4 + 8  # 14-px patches merged 2x2: 56x56 -> 4 tokens, 112x56 -> 8
    assert item["raw_prompt_ids"].count(pad) == 2  # one placeholder per image for the engine
    assert [t for t in item["raw_prompt_ids"] if t != pad] == [t for t in ids if t != pad]
    assert item["position_ids"].shape == (3, 48)
    assert item["multi_modal_inputs"]["image_grid_thw"].tolist() == [[1, 4, 4], [1, 4, 8]]
    assert item["multi_modal_inputs"]["pixel_values"].shape[0] == 16 + 32  # one row per 14x14 patch
    assert len(item["multi_modal_data"]["image"]) == 2 and "images" not in item
    # the text right after each image continues one past the image block's largest position
    valid = item["position_ids"][:, item["attention_mask"].bool()]
    first = ids.index(pad)
    block = valid[:, first : first + 4]  # the first image's 4 tokens (a 2x2 grid of merged patches)
    assert block[1:].unique().numel() == 2 and block[0].unique().numel() == 1  # rows/columns vary, time does not
    assert torch.equal(valid[:, first + 4], block.max().expand(3) + 1)


def test_marker_count_must_match_images(tmp_path, processor):
    with pytest.raises(ValueError, match="1 <image>.*2 entries"):
        _dataset(tmp_path, [_row("<image>count", [_png("red"), _png("blue")])], processor)


def test_media_without_processor_fails(tmp_path):
    with pytest.raises(ValueError, match="no multimodal processor"):
        _dataset(tmp_path, [_row("<image>count", [_png("red")])], None)


def test_truncation_may_not_cut_image_tokens_and_filter_counts_them(tmp_path, processor):
    long_text = "<image>" + " word" * 60
    right = _dataset(tmp_path, [_row(long_text, [_png("red")])], processor, truncation="right")
    item = right[0]  # only trailing text goes
    assert int(item["attention_mask"].sum()) == 48 and item["input_ids"].tolist().count(processor.image_token_id) == 4
    left = _dataset(tmp_path, [_row("<image>" + " word" * 60, [_png("red")])], processor, truncation="left")
    with pytest.raises(ValueError, match="without cutting image tokens"):
        left[0]
    short = _row("<image>count", [_png("red")])
    kept = _dataset(tmp_path, [short, _row(long_text, [_png("red")])], processor, filter_overlong_prompts=True)
    assert len(kept) == 1

"""SFTDataset: prompt/response examples tokenized with SmolLM2's chat template, loss on the response only."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from verl.utils.dataset.sft_dataset import SFTDataset


def _write(tmp_path, rows, name="data.parquet") -> str:
    path = str(tmp_path / name)
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_response_and_eos_are_the_only_targets(tmp_path, tokenizer):
    path = _write(tmp_path, [{"question": "What is 2 + 3?", "answer": "2 + 3 = 5"}])
    item = SFTDataset(path, tokenizer, {"prompt_key": "question", "response_key": "answer", "max_length": 80})[0]
    # reference: the templated text of prompt + response, split by plain string arithmetic
    prompt_text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True, tokenize=False
    )
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer("2 + 3 = 5", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    length = len(prompt_ids) + len(response_ids)
    assert item["input_ids"][:length].tolist() == prompt_ids + response_ids
    assert item["attention_mask"].tolist() == [1] * length + [0] * (80 - length)
    assert item["loss_mask"].tolist() == [0] * len(prompt_ids) + [1] * len(response_ids) + [0] * (80 - length)
    assert item["position_ids"][:length].tolist() == list(range(length))
    assert (item["input_ids"][length:] == tokenizer.pad_token_id).all()
    assert tokenizer.decode(item["input_ids"][item["loss_mask"].bool()]) == "2 + 3 = 5<|im_end|>"


def test_dict_columns_with_dict_keys(tmp_path, tokenizer):
    rows = [{"extra_info": {"question": "Q?", "answer": "A."}}]
    path = _write(tmp_path, rows)
    config = {
        "prompt_key": "extra_info",
        "response_key": "extra_info",
        "prompt_dict_keys": ["question"],
        "response_dict_keys": ["answer"],
        "max_length": 64,
    }
    item = SFTDataset(path, tokenizer, config)[0]
    assert tokenizer.decode(item["input_ids"][item["loss_mask"].bool()]) == "A.<|im_end|>"
    assert "Q?" in tokenizer.decode(item["input_ids"][item["attention_mask"].bool()])


def test_truncation_modes(tmp_path, tokenizer):
    path = _write(tmp_path, [{"question": "word " * 30, "answer": "done"}])
    with pytest.raises(ValueError, match="data.max_length"):
        SFTDataset(path, tokenizer, {"max_length": 16})[0]
    full = SFTDataset(path, tokenizer, {"max_length": 200})[0]
    valid = full["input_ids"][full["attention_mask"].bool()]
    left = SFTDataset(path, tokenizer, {"max_length": 16, "truncation": "left"})[0]
    right = SFTDataset(path, tokenizer, {"max_length": 16, "truncation": "right"})[0]
    assert torch.equal(left["input_ids"], valid[-16:]) and left["loss_mask"][-1] == 1
    assert torch.equal(right["input_ids"], valid[:16]) and right["loss_mask"].sum() == 0


def test_missing_column_names_the_key(tmp_path, tokenizer):
    path = _write(tmp_path, [{"q": "x", "answer": "y"}])
    with pytest.raises(KeyError, match="data.prompt_key"):
        SFTDataset(path, tokenizer, {"prompt_key": "question"})

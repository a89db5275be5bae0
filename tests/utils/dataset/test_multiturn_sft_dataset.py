"""MultiTurnSFTDataset: the loss mask covers exactly the assistant turns (content and end-of-turn token).

The reference spans are found in the rendered conversation text by plain string search and mapped to tokens
with the tokenizer's character offsets, independently of the dataset's prefix-rendering method.
"""

from __future__ import annotations

import pandas as pd
import pytest

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

CONVERSATION = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "What colour is the sky?"},
    {"role": "assistant", "content": "The sky is blue."},
    {"role": "user", "content": "And grass?"},
    {"role": "assistant", "content": "Grass is green."},
]


def reference_loss_mask(tokenizer, messages) -> tuple[list[int], list[int]]:
    """Token ids of the rendered conversation and 1 on every token inside an assistant turn's
    ``content + <|im_end|>`` (found by string search after each ``<|im_start|>assistant\\n`` header)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    char_spans, cursor = [], 0
    for message in messages:
        if message["role"] != "assistant":
            continue
        header = text.index("<|im_start|>assistant\n", cursor) + len("<|im_start|>assistant\n")
        assert text[header : header + len(message["content"])] == message["content"]
        end = header + len(message["content"]) + len("<|im_end|>")
        assert text[end - len("<|im_end|>") : end] == "<|im_end|>"
        char_spans.append((header, end))
        cursor = end
    mask = [int(any(s <= a and b <= e for s, e in char_spans)) for a, b in encoded["offset_mapping"]]
    return encoded["input_ids"], mask


def test_loss_mask_is_exactly_the_assistant_turns(tmp_path, tokenizer):
    path = str(tmp_path / "chat.parquet")
    pd.DataFrame({"messages": [CONVERSATION]}).to_parquet(path)
    item = MultiTurnSFTDataset(path, tokenizer, {"max_length": 128, "multiturn": {"messages_key": "messages"}})[0]
    ids, mask = reference_loss_mask(tokenizer, CONVERSATION)
    n = len(ids)
    assert item["input_ids"][:n].tolist() == ids
    assert item["loss_mask"].tolist() == mask + [0] * (128 - n)
    assert item["attention_mask"].tolist() == [1] * n + [0] * (128 - n)
    assert (
        tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
        == "The sky is blue.<|im_end|>Grass is green.<|im_end|>"
    )


def test_default_system_prompt_and_custom_messages_key(tmp_path, tokenizer):
    conversation = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    path = str(tmp_path / "chat.parquet")
    pd.DataFrame({"dialog": [conversation]}).to_parquet(path)
    item = MultiTurnSFTDataset(path, tokenizer, {"max_length": 64, "multiturn": {"messages_key": "dialog"}})[0]
    ids, mask = reference_loss_mask(tokenizer, conversation)
    assert item["loss_mask"][: len(ids)].tolist() == mask and sum(mask) > 0


def test_conversation_without_assistant_fails(tmp_path, tokenizer):
    path = str(tmp_path / "chat.parquet")
    pd.DataFrame({"messages": [[{"role": "user", "content": "Hi"}]]}).to_parquet(path)
    with pytest.raises(ValueError, match="no assistant message"):
        MultiTurnSFTDataset(path, tokenizer, {"max_length": 64})

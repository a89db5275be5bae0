"""``MultiTurnSFTDataset``: chat conversations for supervised fine-tuning, with the loss on assistant turns only.

The conversation (``data.multiturn.messages_key``, a list of ``{role, content}``) is rendered once with the
tokenizer's chat template. Assistant turn ``i`` covers the tokens from the end of
``template(messages[:i], add_generation_prompt=True)`` (its header, e.g. ``<|im_start|>assistant\\n``, is not
trained) through its end-of-turn EOS token (``<|im_end|>``, trained so the model learns to stop); anything the
template appends after the EOS (a newline) is not trained. Items have the same keys as
:class:`~verl.utils.dataset.sft_dataset.SFTDataset`; ``loss_mask`` is token-aligned.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torch.utils.data import Dataset

from verl.trainer.config.sft import SFTDataConfig
from verl.utils.dataset.sft_dataset import (
    as_file_list,
    fit_to_length,
    prepare_tokenizer,
    read_all_rows,
    sft_data_config,
)


class MultiTurnSFTDataset(Dataset):
    """Conversations of parquet files; constructed as ``MultiTurnSFTDataset(parquet_files, tokenizer, config)``."""

    def __init__(self, parquet_files: Any, tokenizer, config: SFTDataConfig | DictConfig | dict, max_samples: int = -1):
        config = sft_data_config(config)
        self.tokenizer = prepare_tokenizer(tokenizer, config)
        self.messages_key = config.multiturn.messages_key
        self.max_length = config.max_length
        self.truncation = config.truncation
        self.chat_template_kwargs = dict(config.apply_chat_template_kwargs)
        self.rows = read_all_rows(parquet_files, max_samples)
        for index, row in enumerate(self.rows):
            self._check_messages(row, index, as_file_list(parquet_files))

    def _check_messages(self, row: dict[str, Any], index: int, files: list[str]) -> None:
        messages = row.get(self.messages_key)
        where = f"row {index} of {files}"
        if not isinstance(messages, list) or not messages:
            raise ValueError(
                f"{where}: column {self.messages_key!r} must hold a non-empty list of {{role, content}} messages "
                f"(columns: {sorted(row)}); set data.multiturn.messages_key"
            )
        for message in messages:
            if not isinstance(message, dict) or "role" not in message or not isinstance(message.get("content"), str):
                raise ValueError(f"{where}: malformed message {message!r}; expected {{'role': ..., 'content': str}}")
        if not any(message["role"] == "assistant" for message in messages):
            raise ValueError(f"{where}: the conversation has no assistant message, so nothing would be trained")

    def __len__(self) -> int:
        return len(self.rows)

    def _tokenize(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, tokenize=False, **self.chat_template_kwargs
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def assistant_spans(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of the whole conversation and the ``[start, end)`` token span trained for each assistant turn."""
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        input_ids = self._tokenize(messages, add_generation_prompt=False)
        eos_id = self.tokenizer.eos_token_id
        spans = []
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            start = len(self._tokenize(messages[:i], add_generation_prompt=True)) if i > 0 else 0
            through_turn = self._tokenize(messages[: i + 1], add_generation_prompt=False)
            if input_ids[: len(through_turn)] != through_turn:
                raise ValueError(
                    "the chat template does not render conversation prefixes as prefixes of the whole conversation; "
                    "assistant tokens cannot be located (set data.chat_template to a prefix-stable template)"
                )
            end = len(through_turn)
            turn = input_ids[start:end]
            if eos_id in turn:
                end = start + len(turn) - turn[::-1].index(eos_id)
            spans.append((start, end))
        return input_ids, spans

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        input_ids, spans = self.assistant_spans(self.rows[index][self.messages_key])
        loss_mask = [0] * len(input_ids)
        for start, end in spans:
            loss_mask[start:end] = [1] * (end - start)
        return fit_to_length(input_ids, loss_mask, self.max_length, self.tokenizer.pad_token_id, self.truncation)

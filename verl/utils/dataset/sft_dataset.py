"""``SFTDataset``: single-turn prompt/response examples for supervised fine-tuning.

Each example is the chat-templated prompt (one user message, or the row's own message list) followed by the
response and the tokenizer's EOS token, right-padded to ``data.max_length``. An item holds, each ``(max_length,)``:

- ``input_ids``, ``attention_mask``, ``position_ids`` (0-based over the valid tokens);
- ``loss_mask``: 1 on the tokens the model is trained to produce (the response and its EOS), 0 on the prompt
  and padding. It is token-aligned: ``loss_mask[t] = 1`` means token ``t`` is a target, predicted from
  the logits at ``t - 1``.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torch.utils.data import Dataset

from verl.trainer.config.sft import SFTDataConfig
from verl.utils.config import as_typed_config
from verl.utils.dataset.row_reading import read_rows


def as_file_list(files: Any) -> list[str]:
    """``files`` (a path or a list of paths, ``~`` expanded) as a list of strings."""
    import os

    if files is None:
        return []
    if isinstance(files, str):
        files = [files]
    return [os.path.expanduser(str(path)) for path in files]


def read_all_rows(files: Any, max_samples: int = -1) -> list[dict[str, Any]]:
    """Rows of every parquet/jsonl file in ``files``, in order; at most ``max_samples`` when positive."""
    rows: list[dict[str, Any]] = []
    for path in as_file_list(files):
        rows.extend(read_rows(path))
    if max_samples is not None and max_samples > 0:
        rows = rows[:max_samples]
    return rows


def fit_to_length(
    input_ids: list[int], loss_mask: list[int], max_length: int, pad_token_id: int, truncation: str
) -> dict[str, torch.Tensor]:
    """Truncate (``left`` keeps the end, ``right`` the start, ``error`` raises) or right-pad to ``max_length``.

    Returns ``input_ids``, ``attention_mask``, ``position_ids`` and ``loss_mask``, each ``(max_length,)``.
    """
    if len(input_ids) > max_length:
        if truncation == "left":
            input_ids, loss_mask = input_ids[-max_length:], loss_mask[-max_length:]
        elif truncation == "right":
            input_ids, loss_mask = input_ids[:max_length], loss_mask[:max_length]
        else:
            raise ValueError(
                f"an example has {len(input_ids)} tokens, more than data.max_length={max_length}; raise "
                "data.max_length or set data.truncation=left|right"
            )
    padding = max_length - len(input_ids)
    ids = torch.tensor(list(input_ids) + [pad_token_id] * padding, dtype=torch.long)
    attention_mask = torch.tensor([1] * len(input_ids) + [0] * padding, dtype=torch.long)
    return {
        "input_ids": ids,
        "attention_mask": attention_mask,
        "position_ids": torch.clip(torch.cumsum(attention_mask, dim=0) - 1, min=0),
        "loss_mask": torch.tensor(list(loss_mask) + [0] * padding, dtype=torch.long),
    }


def sft_data_config(config: SFTDataConfig | DictConfig | dict) -> SFTDataConfig:
    """The ``data`` section as an :class:`SFTDataConfig` (a DictConfig/dict of its keys takes the other defaults)."""
    return as_typed_config(config, SFTDataConfig, "data")


def prepare_tokenizer(tokenizer, config: SFTDataConfig):
    """Apply ``data.chat_template`` and make sure a pad token exists (pad with EOS otherwise)."""
    if config.chat_template:
        tokenizer.chat_template = config.chat_template
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has neither a pad nor an EOS token; SFT needs one to pad examples")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _select(value: Any, dict_keys: Any, column: str, option_name: str) -> Any:
    """``value[dict_keys[0]]`` when the column holds dicts (verl's ``prompt_dict_keys``), else ``value``."""
    if not isinstance(value, dict):
        return value
    if not dict_keys:
        raise ValueError(
            f"column {column!r} holds dicts with keys {sorted(value)}; set data.{option_name}=['<key>'] to pick one"
        )
    key = list(dict_keys)[0]
    if key not in value:
        raise KeyError(f"data.{option_name}={list(dict_keys)}: key {key!r} not in column {column!r} ({sorted(value)})")
    return value[key]


class SFTDataset(Dataset):
    """Prompt/response columns (``data.prompt_key``, ``data.response_key``) of parquet files.

    Constructed as ``SFTDataset(parquet_files, tokenizer, config, max_samples=-1)`` where ``config`` holds the
    ``data.*`` keys. Examples are tokenized lazily in ``__getitem__``.
    """

    def __init__(self, parquet_files: Any, tokenizer, config: SFTDataConfig | DictConfig | dict, max_samples: int = -1):
        config = sft_data_config(config)
        self.tokenizer = prepare_tokenizer(tokenizer, config)
        self.prompt_key = config.prompt_key
        self.response_key = config.response_key
        self.prompt_dict_keys = config.prompt_dict_keys
        self.response_dict_keys = config.response_dict_keys
        self.max_length = config.max_length
        self.truncation = config.truncation
        self.chat_template_kwargs = dict(config.apply_chat_template_kwargs)
        self.rows = read_all_rows(parquet_files, max_samples)
        for index, row in enumerate(self.rows[:1]):
            for key in (self.prompt_key, self.response_key):
                if key not in row:
                    raise KeyError(
                        f"row {index} of {as_file_list(parquet_files)} has no column {key!r} "
                        f"(columns: {sorted(row)}); set data.prompt_key / data.response_key"
                    )

    def __len__(self) -> int:
        return len(self.rows)

    def prompt_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        """The prompt as chat messages: the row's own message list, or its text as one user message."""
        prompt = _select(row[self.prompt_key], self.prompt_dict_keys, self.prompt_key, "prompt_dict_keys")
        if isinstance(prompt, list):
            return [dict(message) for message in prompt]
        return [{"role": "user", "content": str(prompt)}]

    def response_text(self, row: dict[str, Any]) -> str:
        return str(_select(row[self.response_key], self.response_dict_keys, self.response_key, "response_dict_keys"))

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        row = self.rows[index]
        prompt_text = self.tokenizer.apply_chat_template(
            self.prompt_messages(row), add_generation_prompt=True, tokenize=False, **self.chat_template_kwargs
        )
        prompt_ids = self.tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        response_ids = self.tokenizer(self.response_text(row), add_special_tokens=False)["input_ids"]
        response_ids = list(response_ids) + [self.tokenizer.eos_token_id]
        loss_mask = [0] * len(prompt_ids) + [1] * len(response_ids)
        return fit_to_length(
            list(prompt_ids) + response_ids, loss_mask, self.max_length, self.tokenizer.pad_token_id, self.truncation
        )

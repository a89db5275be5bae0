"""``RLHFDataset``: chat prompts from parquet / jsonl files, tokenized with the chat template and left-padded.

Each item (see :meth:`RLHFDataset.__getitem__`) holds ``input_ids``, ``attention_mask``, ``position_ids``
(each ``(max_prompt_length,)``, left-padded), ``raw_prompt_ids`` (the unpadded ids), ``raw_prompt`` (the
chat messages, with ``data.return_raw_chat``), and the row's ``data_source``, ``reward_model``,
``extra_info``, ``ability``, ``index`` and ``tools_kwargs``. :func:`collate_fn` stacks items into the
dict that ``DataProto.from_single_dict`` takes.

With a processor (vision-language models), rows may carry ``data.image_key`` / ``data.video_key`` media;
items then also hold ``multi_modal_data`` (for the rollout engine) and ``multi_modal_inputs`` (for the
training forward), ``position_ids`` are M-RoPE ids ``(3, max_prompt_length)`` and ``raw_prompt_ids`` keep one
placeholder token per image (:mod:`verl.utils.dataset.multimodal_prompt`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from verl.utils.dataset.builtin import resolve_data_files
from verl.utils.dataset.padding import TRUNCATION_MODES, left_pad, truncate_ids
from verl.utils.dataset.row_reading import check_row, read_rows

logger = logging.getLogger(__name__)


@dataclass
class DatasetOptions:
    """The ``data.*`` keys the dataset reads, with verl's defaults."""

    prompt_key: str = "prompt"
    image_key: str = "images"
    video_key: str = "videos"
    max_prompt_length: int = 1024
    filter_overlong_prompts: bool = False
    truncation: str = "error"
    return_raw_chat: bool = False
    return_full_prompt: bool = False
    seed: int = 1
    shuffle: bool = True
    max_samples: int = -1
    reward_fn_key: str = "data_source"
    apply_chat_template_kwargs: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Any) -> DatasetOptions:
        """Read the keys from a dataclass, DictConfig or dict; absent or None keys keep the default."""
        values = {}
        for name in cls.__dataclass_fields__:
            value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
            if value is not None:
                values[name] = value
        options = cls(**values)
        options.apply_chat_template_kwargs = dict(options.apply_chat_template_kwargs or {})
        if options.truncation not in TRUNCATION_MODES:
            raise ValueError(f"data.truncation={options.truncation!r}; choose one of {TRUNCATION_MODES}")
        if options.max_prompt_length <= 0:
            raise ValueError(f"data.max_prompt_length must be positive, got {options.max_prompt_length}")
        return options


def _as_path_list(data_files: Any) -> list[str]:
    if isinstance(data_files, str):
        return [data_files]
    return [str(path) for path in data_files]


class RLHFDataset(Dataset):
    """Prompts of one or several files, optionally without those longer than ``max_prompt_length``."""

    def __init__(self, data_files: str | list[str], tokenizer, config: Any, processor=None, max_samples: int = -1):
        self.tokenizer = tokenizer
        self.processor = processor
        self.options = DatasetOptions.from_config(config)
        self.multimodal = None
        if processor is not None:
            from verl.utils.dataset.multimodal_prompt import MultiModalPromptEncoder

            self.multimodal = MultiModalPromptEncoder(
                processor, self.options.image_key, self.options.video_key, self.options.apply_chat_template_kwargs
            )
        if max_samples is not None and max_samples > 0:
            self.options.max_samples = max_samples
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set one (e.g. pad_token = eos_token) before loading data")
        self.data_files = resolve_data_files(_as_path_list(data_files))
        self.rows = self._read_all()
        self.num_filtered = 0
        if self.options.filter_overlong_prompts:
            self._drop_overlong_prompts()

    def _read_all(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in self.data_files:
            file_rows = read_rows(path)
            for row_number, row in enumerate(file_rows):
                check_row(row, path, row_number, self.options.prompt_key, self.options.reward_fn_key)
                self._check_media(row, path, row_number)
            rows.extend(file_rows)
        if 0 < self.options.max_samples < len(rows):
            if self.options.shuffle:
                keep = np.random.default_rng(self.options.seed).permutation(len(rows))[: self.options.max_samples]
                rows = [rows[i] for i in sorted(keep)]
            else:
                rows = rows[: self.options.max_samples]
        return rows

    def _check_media(self, row: dict[str, Any], path: str, row_number: int) -> None:
        has_media = bool(row.get(self.options.image_key) or row.get(self.options.video_key))
        if self.multimodal is not None:
            self.multimodal.check_row(row, row[self.options.prompt_key], path, row_number)
        elif has_media:
            raise ValueError(
                f"{path}: row {row_number} (0-based) has {self.options.image_key!r}/{self.options.video_key!r} "
                "media but the model has no multimodal processor; use a vision-language model "
                "(actor_rollout_ref.model.path) or drop the media columns"
            )

    def chat_text(self, messages: list[dict[str, Any]]) -> str:
        """The prompt as the model sees it: the chat template with the generation prompt appended."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self.options.apply_chat_template_kwargs
        )

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """Token ids of :meth:`chat_text` (the template already holds the special tokens)."""
        return self.tokenizer(self.chat_text(messages), add_special_tokens=False)["input_ids"]

    def _prompt_lengths(self) -> list[int]:
        """Token count of every prompt, image tokens included."""
        if self.multimodal is not None:
            return [self.multimodal.prompt_length(row, row[self.options.prompt_key]) for row in self.rows]
        texts = [self.chat_text(row[self.options.prompt_key]) for row in self.rows]
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def _drop_overlong_prompts(self) -> None:
        lengths = self._prompt_lengths()
        before = len(self.rows)
        self.rows = [row for row, length in zip(self.rows, lengths) if length <= self.options.max_prompt_length]
        self.num_filtered = before - len(self.rows)
        logger.warning(
            "filtered %d of %d prompts longer than data.max_prompt_length=%d (%s)",
            self.num_filtered,
            before,
            self.options.max_prompt_length,
            ", ".join(self.data_files),
        )
        if not self.rows:
            raise ValueError(
                f"every prompt of {self.data_files} is longer than data.max_prompt_length="
                f"{self.options.max_prompt_length}; raise it"
            )

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, item: int) -> dict[str, Any]:
        row = dict(self.rows[item])
        messages = row[self.options.prompt_key]
        if self.multimodal is not None:
            self._encode_multimodal(row, messages)
        else:
            ids = truncate_ids(self.prompt_ids(messages), self.options.max_prompt_length, self.options.truncation)
            input_ids, attention_mask, position_ids = left_pad(
                ids, self.options.max_prompt_length, self.tokenizer.pad_token_id
            )
            row.update(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, raw_prompt_ids=ids
            )
        row.pop(self.options.prompt_key)
        extra_info = row.get("extra_info") or {}
        row.update(
            index=extra_info.get("index", item),
            tools_kwargs=extra_info.get("tools_kwargs") or {},
            interaction_kwargs=extra_info.get("interaction_kwargs") or {},
        )
        row["extra_info"] = extra_info
        if self.options.return_raw_chat:
            row["raw_prompt"] = messages
        if self.options.return_full_prompt:
            row["full_prompts"] = row.pop("_text", None) or self.chat_text(messages)
        row.pop("_text", None)
        return row

    def _encode_multimodal(self, row: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        """Fill ``row`` with the processor's encoding; ``position_ids`` are M-RoPE ``(3, P)``, 0 on padding."""
        encoded = self.multimodal.encode(row, messages, self.options.max_prompt_length, self.options.truncation)
        input_ids, attention_mask, _ = left_pad(
            encoded.ids, self.options.max_prompt_length, self.tokenizer.pad_token_id
        )
        position_ids = torch.zeros(3, self.options.max_prompt_length, dtype=torch.long)
        position_ids[:, self.options.max_prompt_length - len(encoded.ids) :] = encoded.position_ids
        row.pop(self.options.image_key, None)
        row.pop(self.options.video_key, None)
        row.update(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            raw_prompt_ids=encoded.raw_prompt_ids,
            multi_modal_data=encoded.multi_modal_data,
            multi_modal_inputs=encoded.multi_modal_inputs,
            _text=encoded.text,
        )


def collate_fn(items: list[dict[str, Any]]) -> dict[str, torch.Tensor | np.ndarray]:
    """Stack tensors to ``(batch, ...)``; gather every other value into a 1-D object array of length batch."""
    batch: dict[str, torch.Tensor | np.ndarray] = {}
    for key in items[0]:
        values = [item[key] for item in items]
        if isinstance(values[0], torch.Tensor):
            batch[key] = torch.stack(values)
        else:
            array = np.empty(len(values), dtype=object)
            for i, value in enumerate(values):  # element by element: numpy would turn equal-length lists 2-D
                array[i] = value
            batch[key] = array
    return batch

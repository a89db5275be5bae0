"""``RLHFDataset``: chat prompts from parquet / jsonl files, tokenized with the chat template and left-padded.

Each item (see :meth:`RLHFDataset.__getitem__`) holds ``input_ids``, ``attention_mask``, ``position_ids``
(each ``(max_prompt_length,)``, left-padded), ``raw_prompt_ids`` (the unpadded ids), ``raw_prompt`` (the
chat messages, with ``data.return_raw_chat``), and the row's ``data_source``, ``reward_model``,
``extra_info``, ``ability``, ``index`` and ``tools_kwargs``. :func:`collate_fn` stacks items into the
dict that ``DataProto.from_single_dict`` takes.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from torch.utils.data import Dataset

from verl.trainer.config.data import DataConfig
from verl.utils.config import as_typed_config
from verl.utils.dataset.builtin import resolve_data_files
from verl.utils.dataset.padding import left_pad, truncate_ids
from verl.utils.dataset.row_reading import check_row, read_rows
from verl.utils.fs import copy_to_local

logger = logging.getLogger(__name__)


def _as_path_list(data_files: Any) -> list[str]:
    if isinstance(data_files, str):
        return [data_files]
    return [str(path) for path in data_files]


class RLHFDataset(Dataset):
    """Prompts of one or several files, optionally without those longer than ``max_prompt_length``.

    ``config`` is the ``data`` section: a :class:`DataConfig`, or a DictConfig/dict of its keys (missing keys take
    the dataclass defaults, unknown keys fail). At most ``max_samples`` rows are kept (-1: all): a seeded random
    subset when ``shuffle`` is set, else the first rows.
    """

    def __init__(
        self,
        data_files: str | list[str],
        tokenizer,
        config: DataConfig | DictConfig | dict,
        processor=None,
        max_samples: int = -1,
    ):
        self.tokenizer = tokenizer
        self.processor = processor
        self.config = as_typed_config(config, DataConfig, "data")
        self.multimodal = None
        if processor is not None:
            from verl.utils.dataset.multimodal_prompt import MultiModalPromptEncoder

            self.multimodal = MultiModalPromptEncoder(
                processor, self.config.image_key, self.config.video_key, self.config.apply_chat_template_kwargs
            )
        self.max_samples = -1 if max_samples is None else int(max_samples)
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set one (e.g. pad_token = eos_token) before loading data")
        self.data_files = [
            copy_to_local(path, use_shm=self.config.use_shm) for path in resolve_data_files(_as_path_list(data_files))
        ]
        self.rows = self._read_all()
        self.num_filtered = 0
        if self.config.filter_overlong_prompts:
            self._drop_overlong_prompts()

    def _read_all(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in self.data_files:
            file_rows = read_rows(path)
            for row_number, row in enumerate(file_rows):
                check_row(row, path, row_number, self.config.prompt_key, self.config.reward_fn_key)
                self._check_media(row, path, row_number)
            rows.extend(file_rows)
        if 0 < self.max_samples < len(rows):
            if self.config.shuffle:
                keep = np.random.default_rng(self.config.seed).permutation(len(rows))[: self.max_samples]
                rows = [rows[i] for i in sorted(keep)]
            else:
                rows = rows[: self.max_samples]
        return rows

    def _check_media(self, row: dict[str, Any], path: str, row_number: int) -> None:
        has_media = bool(row.get(self.config.image_key) or row.get(self.config.video_key))
        if self.multimodal is not None:
            self.multimodal.check_row(row, row[self.config.prompt_key], path, row_number)
        elif has_media:
            raise ValueError(
                f"{path}: row {row_number} (0-based) has {self.config.image_key!r}/{self.config.video_key!r} "
                "media but the model has no multimodal processor; use a vision-language model "
                "(actor_rollout_ref.model.path) or drop the media columns"
            )

    def chat_text(self, messages: list[dict[str, Any]]) -> str:
        """The prompt as the model sees it: the chat template with the generation prompt appended."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self.config.apply_chat_template_kwargs
        )

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """Token ids of :meth:`chat_text` (the template already holds the special tokens)."""
        return self.tokenizer(self.chat_text(messages), add_special_tokens=False)["input_ids"]

    def _prompt_lengths(self) -> list[int]:
        """Token count of every row's templated prompt (image tokens included), in
        ``data.filter_overlong_prompts_workers`` processes for text prompts."""
        if self.multimodal is not None:
            return [self.multimodal.prompt_length(row, row[self.config.prompt_key]) for row in self.rows]
        prompts = [row[self.config.prompt_key] for row in self.rows]
        workers = min(self.config.filter_overlong_prompts_workers, max(1, len(prompts)))
        if workers == 1:
            return _lengths(self.tokenizer, self.config.apply_chat_template_kwargs, prompts)
        import concurrent.futures
        import multiprocessing

        chunks = [prompts[i::workers] for i in range(workers)]
        context = multiprocessing.get_context("spawn")  # fork would copy torch/Ray threads
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            kwargs = [self.config.apply_chat_template_kwargs] * workers
            parts = list(pool.map(_lengths, [self.tokenizer] * workers, kwargs, chunks))
        lengths = [0] * len(prompts)
        for start, part in enumerate(parts):
            lengths[start::workers] = part
        return lengths

    def _drop_overlong_prompts(self) -> None:
        lengths = self._prompt_lengths()
        before = len(self.rows)
        self.rows = [row for row, length in zip(self.rows, lengths) if length <= self.config.max_prompt_length]
        self.num_filtered = before - len(self.rows)
        logger.warning(
            "filtered %d of %d prompts longer than data.max_prompt_length=%d (%s)",
            self.num_filtered,
            before,
            self.config.max_prompt_length,
            ", ".join(self.data_files),
        )
        if not self.rows:
            raise ValueError(
                f"every prompt of {self.data_files} is longer than data.max_prompt_length="
                f"{self.config.max_prompt_length}; raise it"
            )

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, item: int) -> dict[str, Any]:
        row = dict(self.rows[item])
        messages = row.pop(self.config.prompt_key)
        if self.multimodal is not None:
            self._encode_multimodal(row, messages)
        else:
            ids = truncate_ids(self.prompt_ids(messages), self.config.max_prompt_length, self.config.truncation)
            input_ids, attention_mask, position_ids = left_pad(
                ids, self.config.max_prompt_length, self.tokenizer.pad_token_id
            )
            row.update(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, raw_prompt_ids=ids
            )
        extra_info = row.get("extra_info") or {}
        row.update(
            index=extra_info.get("index", item),
            tools_kwargs=extra_info.get("tools_kwargs") or {},
            interaction_kwargs=extra_info.get("interaction_kwargs") or {},
        )
        row["extra_info"] = extra_info
        if self.config.return_raw_input_ids:
            plain = messages if isinstance(messages, str) else "\n".join(str(m["content"]) for m in messages)
            row["raw_input_ids"] = self.tokenizer(plain, add_special_tokens=False)["input_ids"]
        if self.config.return_raw_chat:
            row["raw_prompt"] = messages
        if self.config.return_full_prompt:
            row["full_prompts"] = row.pop("_text", None) or self.chat_text(messages)
        row.pop("_text", None)
        return row

    def _encode_multimodal(self, row: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        """Fill ``row`` with the processor's encoding; ``position_ids`` are M-RoPE ``(3, P)``, 0 on padding."""
        max_length = self.config.max_prompt_length
        encoded = self.multimodal.encode(row, messages, max_length, self.config.truncation)
        input_ids, attention_mask, _ = left_pad(encoded.ids, max_length, self.tokenizer.pad_token_id)
        position_ids = torch.zeros(3, max_length, dtype=torch.long)
        position_ids[:, max_length - len(encoded.ids) :] = encoded.position_ids
        row.pop(self.config.image_key, None)
        row.pop(self.config.video_key, None)
        row.update(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            raw_prompt_ids=encoded.raw_prompt_ids,
            multi_modal_data=encoded.multi_modal_data,
            multi_modal_inputs=encoded.multi_modal_inputs,
            _text=encoded.text,
        )


def _lengths(tokenizer, chat_template_kwargs: dict, prompts: list) -> list[int]:
    """Token counts of chat prompts with the generation prompt appended (a process-pool task)."""
    texts = [
        tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False, **chat_template_kwargs)
        for m in prompts
    ]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


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

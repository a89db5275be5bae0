"""Encode a prompt row with images / videos through a Qwen2-VL-style processor.

The processor renders the chat template, expands each image's single ``<|image_pad|>`` into one token per
merged patch and turns the pixels into ``pixel_values``. The result (:class:`EncodedPrompt`) holds what each
consumer needs: the expanded ids for training, the same ids with each placeholder run collapsed back to one
token for the rollout engine (which expands them itself from the images), the images for the engine
(``multi_modal_data``), the processor's tensors for the training forward (``multi_modal_inputs``) and the
M-RoPE position ids (:mod:`verl.models.transformers.qwen2_vl`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from verl.models.transformers.qwen2_vl import get_rope_index
from verl.utils.dataset.padding import truncate_ids
from verl.utils.dataset.vision_utils import build_multimodal_messages, count_placeholders, process_image, process_video
from verl.utils.processor_compat import has_video_processor

# processor outputs that are not model inputs: token ids / mask go separately, the rest only serve M-RoPE
_NOT_MODEL_INPUTS = ("input_ids", "attention_mask", "mm_token_type_ids", "second_per_grid_ts")


@dataclass
class EncodedPrompt:
    """One prompt: ``ids`` (expanded placeholders, truncated), ``raw_prompt_ids`` (one placeholder per image or
    video), ``position_ids (3, len(ids))``, ``multi_modal_data`` (``{"image": [PIL], "video": [array]}``),
    ``multi_modal_inputs`` (e.g. ``pixel_values (patches, C*T*P*P)``, ``image_grid_thw (images, 3)``), ``text``."""

    ids: list[int]
    raw_prompt_ids: list[int]
    position_ids: torch.Tensor
    multi_modal_data: dict[str, list]
    multi_modal_inputs: dict[str, torch.Tensor]
    text: str


def _collapse_runs(ids: list[int], tokens: set[int]) -> list[int]:
    """``ids`` with each run of one of ``tokens`` reduced to a single token."""
    out: list[int] = []
    for token in ids:
        if token in tokens and out and out[-1] == token:
            continue
        out.append(token)
    return out


class MultiModalPromptEncoder:
    """Rows -> :class:`EncodedPrompt` with a Qwen2-VL / Qwen2.5-VL processor; ``image_key`` / ``video_key`` name
    the row's media columns (``data.image_key``, ``data.video_key``)."""

    def __init__(self, processor, image_key: str = "images", video_key: str = "videos", chat_template_kwargs=None):
        if getattr(getattr(processor, "image_processor", None), "merge_size", None) is None:
            raise ValueError(
                f"{type(processor).__name__}: multimodal prompts need a Qwen2-VL / Qwen2.5-VL processor "
                "(an image processor with merge_size); other vision-language families are not supported yet"
            )
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_key = image_key
        self.video_key = video_key
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.image_token_id = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.video_token_id = self.tokenizer.convert_tokens_to_ids("<|video_pad|>")

    def media(self, row: dict[str, Any]) -> tuple[list, list]:
        """The row's ``(images, videos)`` entries (empty lists when absent)."""
        return list(row.get(self.image_key) or []), list(row.get(self.video_key) or [])

    def check_row(self, row: dict[str, Any], messages: list[dict[str, Any]], path: str, row_number: int) -> None:
        """Fail when the ``<image>`` / ``<video>`` markers do not match the row's number of images / videos."""
        images, videos = self.media(row)
        marked_images, marked_videos = count_placeholders(messages)
        if (marked_images, marked_videos) != (len(images), len(videos)):
            raise ValueError(
                f"{path}: row {row_number} (0-based) marks {marked_images} <image> and {marked_videos} <video> in its "
                f"prompt but has {len(images)} entries in {self.image_key!r} and {len(videos)} in {self.video_key!r}; "
                "put one marker per image / video in the message text"
            )

    def _process(self, row: dict[str, Any], messages: list[dict[str, Any]]):
        images, videos = self.media(row)
        text = self.processor.apply_chat_template(
            build_multimodal_messages(messages), add_generation_prompt=True, tokenize=False, **self.chat_template_kwargs
        )
        images = [process_image(image) for image in images]
        videos = [process_video(video) for video in videos]
        if videos and not has_video_processor(self.processor):
            raise ValueError(
                f"row has {len(videos)} videos but {type(self.processor).__name__} has no video processor "
                "(transformers needs torchvision for video processors; install it)"
            )
        outputs = self.processor(text=[text], images=images or None, videos=videos or None, return_tensors="pt")
        return text, images, videos, outputs

    def prompt_length(self, row: dict[str, Any], messages: list[dict[str, Any]]) -> int:
        """Tokens of the prompt with every placeholder expanded (what counts against ``max_prompt_length``)."""
        return int(self._process(row, messages)[3]["input_ids"].shape[-1])

    def encode(self, row: dict[str, Any], messages: list[dict[str, Any]], max_length: int, truncation: str):
        """Encode one row; truncation may cut text only (cutting into an image's tokens raises)."""
        text, images, videos, outputs = self._process(row, messages)
        full_ids = outputs["input_ids"][0].tolist()
        ids = truncate_ids(full_ids, max_length, truncation)
        vision_tokens = {self.image_token_id, self.video_token_id}
        if len(ids) != len(full_ids) and sum(t in vision_tokens for t in ids) != sum(
            t in vision_tokens for t in full_ids
        ):
            raise ValueError(
                f"a prompt of {len(full_ids)} tokens (images included) does not fit data.max_prompt_length="
                f"{max_length} without cutting image tokens; raise max_prompt_length, lower the processor's "
                "max_pixels or set data.filter_overlong_prompts=true"
            )
        position_ids = get_rope_index(
            self.processor,
            torch.tensor(ids),
            image_grid_thw=outputs.get("image_grid_thw"),
            video_grid_thw=outputs.get("video_grid_thw"),
            second_per_grid_ts=outputs.get("second_per_grid_ts"),
        )
        inputs = {key: value for key, value in outputs.items() if key not in _NOT_MODEL_INPUTS}
        data: dict[str, list] = {}
        if images:
            data["image"] = images
        if videos:
            data["video"] = videos
        raw_prompt_ids = _collapse_runs(ids, vision_tokens)
        return EncodedPrompt(ids, raw_prompt_ids, position_ids, data, inputs, text)

"""Images and video frames of a dataset row, as the processor and the rollout engine take them.

verl's schema: ``images`` is a list whose entries are ``{"bytes": ..., "path": ...}`` dicts (what Hugging
Face ``datasets`` writes to parquet), ``{"image": PIL.Image}``, a file path, raw bytes, or a PIL image;
``videos`` is a list whose entries are lists of frames (each frame an image entry), ``{"video": [frames]}``,
or a path to a folder of frame images. Prompts mark where each image / video goes with ``<image>`` /
``<video>`` in the message text (:func:`build_multimodal_messages`).
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

import numpy as np
from PIL import Image

IMAGE_PLACEHOLDER = "<image>"
VIDEO_PLACEHOLDER = "<video>"
_PLACEHOLDERS = re.compile(f"({IMAGE_PLACEHOLDER}|{VIDEO_PLACEHOLDER})")
_FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def process_image(image: Any) -> Image.Image:
    """One image entry as an RGB ``PIL.Image`` (resizing is left to the processor, so the rollout engine's
    processor sees the very same pixels)."""
    if isinstance(image, Image.Image):
        return image.convert("RGB")
    if isinstance(image, dict):
        if image.get("bytes") is not None:
            return process_image(bytes(image["bytes"]))
        if image.get("image") is not None:
            return process_image(image["image"])
        if image.get("path"):
            return process_image(str(image["path"]))
        raise ValueError(f"image entry {sorted(image)} has none of 'bytes', 'image', 'path'")
    if isinstance(image, (bytes, bytearray)):
        return Image.open(io.BytesIO(image)).convert("RGB")
    if isinstance(image, str):
        path = image[len("file://") :] if image.startswith("file://") else image
        if not os.path.isfile(path):
            raise FileNotFoundError(f"image file {path!r} does not exist")
        with Image.open(path) as opened:
            return opened.convert("RGB")
    raise ValueError(f"unsupported image entry of type {type(image).__name__}; use bytes, a path or a PIL image")


def process_video(video: Any) -> np.ndarray:
    """One video entry as ``(frames, height, width, 3)`` uint8 frames (all frames the same size)."""
    if isinstance(video, dict):
        if "video" not in video:
            raise ValueError(f"video entry {sorted(video)} has no 'video' key (a list of frames)")
        video = video["video"]
    if isinstance(video, str):
        folder = video[len("file://") :] if video.startswith("file://") else video
        if not os.path.isdir(folder):
            raise ValueError(
                f"video {video!r}: give a folder of frame images or a list of frames; video files need a decoder "
                "this build does not ship (extract frames first)"
            )
        video = [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith(_FRAME_SUFFIXES)]
    if isinstance(video, np.ndarray) and video.ndim == 4:
        return video.astype(np.uint8)
    frames = [np.asarray(process_image(frame)) for frame in video]
    if not frames:
        raise ValueError("a video entry has no frames")
    if len({frame.shape for frame in frames}) != 1:
        raise ValueError(f"video frames differ in size: {sorted({frame.shape for frame in frames})}")
    return np.stack(frames)


def build_multimodal_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages whose ``<image>`` / ``<video>`` markers become ``{"type": "image"}`` / ``{"type": "video"}``
    parts between ``{"type": "text"}`` parts (the content format of vision-language chat templates)."""
    built = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            built.append(dict(message))
            continue
        parts: list[dict[str, Any]] = []
        for segment in _PLACEHOLDERS.split(content):
            if segment == IMAGE_PLACEHOLDER:
                parts.append({"type": "image"})
            elif segment == VIDEO_PLACEHOLDER:
                parts.append({"type": "video"})
            elif segment:
                parts.append({"type": "text", "text": segment})
        built.append({**message, "content": parts})
    return built


def count_placeholders(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """``(images, videos)`` marked in the messages' text."""
    text = "".join(m["content"] for m in messages if isinstance(m.get("content"), str))
    return text.count(IMAGE_PLACEHOLDER), text.count(VIDEO_PLACEHOLDER)

"""The built-in visual task: count the shapes drawn on a small image, generated deterministically with PIL.

Each image (``image_size`` pixels a side, white background) holds ``count`` shapes, ``count`` uniform in
``[1, max_count]``: filled circles, squares or triangles of random colours in distinct cells of a 3x3 grid
(so they never overlap). The prompt shows the image and asks for the number after ``####``; the
``shapes_count`` scorer is the arithmetic task's (:mod:`verl.utils.reward_score.arithmetic`). Rows follow verl's
multimodal schema: ``images`` is a list of ``{"bytes": PNG, "path": None}``.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw

DATA_SOURCE = "shapes_count"
QUESTION = 'How many shapes are in the image? Give only the final answer after "####".'
COLORS = ("red", "green", "blue", "orange", "purple", "black")
KINDS = ("circle", "square", "triangle")
GRID = 3


@dataclass(frozen=True)
class ShapesSpec:
    """How many images to make, how large, and how many shapes at most."""

    train_size: int = 2048
    test_size: int = 128
    image_size: int = 84
    max_count: int = 5
    seed: int = 2025


def draw_shapes(rng: random.Random, count: int, image_size: int) -> Image.Image:
    """An RGB image with ``count`` non-overlapping shapes (``count <= 9``)."""
    image = Image.new("RGB", (image_size, image_size), "white")
    draw = ImageDraw.Draw(image)
    cell = image_size // GRID
    for slot in rng.sample(range(GRID * GRID), count):
        x0, y0 = (slot % GRID) * cell + 2, (slot // GRID) * cell + 2
        x1, y1 = x0 + cell - 5, y0 + cell - 5
        color, kind = rng.choice(COLORS), rng.choice(KINDS)
        if kind == "circle":
            draw.ellipse((x0, y0, x1, y1), fill=color)
        elif kind == "square":
            draw.rectangle((x0, y0, x1, y1), fill=color)
        else:
            draw.polygon([((x0 + x1) // 2, y0), (x0, y1), (x1, y1)], fill=color)
    return image


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def make_row(image: Image.Image, count: int, split: str, index: int) -> dict[str, Any]:
    """A row in verl's multimodal schema for one image."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"<image>{QUESTION}"}],
        "images": [{"bytes": png_bytes(image), "path": None}],
        "ability": "visual_counting",
        "reward_model": {"style": "rule", "ground_truth": str(count)},
        "extra_info": {"split": split, "index": index, "count": count},
    }


def make_split(split: str, spec: ShapesSpec = ShapesSpec()) -> list[dict[str, Any]]:
    """All rows of ``split`` ('train' or 'test'), drawn from seeds that differ between the splits."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if not 1 <= spec.max_count <= GRID * GRID:
        raise ValueError(f"max_count must be in [1, {GRID * GRID}], got {spec.max_count}")
    rng = random.Random(f"{spec.seed}-{split}")
    size = spec.train_size if split == "train" else spec.test_size
    rows = []
    for index in range(size):
        count = rng.randint(1, spec.max_count)
        rows.append(make_row(draw_shapes(rng, count, spec.image_size), count, split, index))
    return rows

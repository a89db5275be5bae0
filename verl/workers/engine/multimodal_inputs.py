"""Per-sample multimodal model inputs through micro-batching.

``multi_modal_inputs`` is a non-tensor column of ``DataProto`` (one dict per sample: ``pixel_values
(patches, dim)``, ``image_grid_thw (images, 3)``, ...), since samples have different numbers of patches.
Micro-batches are cut from the tensor batch (fixed-size or token-budget splits that reorder rows), so the
tensor batch carries each row's index (:data:`ROW_INDEX_KEY`) and a micro-batch gathers its rows' inputs by
it, concatenated along dim 0 in row order: the order in which the model scatters image features into the
placeholder tokens of the (padded or packed) micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

ROW_INDEX_KEY = "multi_modal_row_index"


def with_row_index(batch):
    """``batch`` (a TensorDict of ``bs`` rows) with ``ROW_INDEX_KEY = arange(bs)`` added."""
    batch[ROW_INDEX_KEY] = torch.arange(batch.batch_size[0])
    return batch


def collate_multi_modal_inputs(rows: Sequence[dict | None]) -> dict[str, torch.Tensor] | None:
    """Concatenate each key of the rows' input dicts along dim 0 (rows without inputs contribute nothing);
    ``None`` when no row has any."""
    keys: list[str] = []
    for row in rows:
        for key in row or {}:
            if key not in keys:
                keys.append(key)
    if not keys:
        return None
    return {key: torch.cat([torch.as_tensor(row[key]) for row in rows if row and key in row], dim=0) for key in keys}


def micro_batch_multi_modal_inputs(
    rows: np.ndarray | None, micro_batch, device: torch.device | str | None = None
) -> dict[str, torch.Tensor] | None:
    """The inputs of ``micro_batch``'s rows (found by :data:`ROW_INDEX_KEY`), on ``device``."""
    if rows is None:
        return None
    indices = micro_batch[ROW_INDEX_KEY].tolist()
    inputs = collate_multi_modal_inputs([rows[i] for i in indices])
    if inputs is None or device is None:
        return inputs
    return {key: value.to(device) for key, value in inputs.items()}

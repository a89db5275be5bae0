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


def check_response_placeholders(
    responses: torch.Tensor, response_mask: torch.Tensor, placeholder_ids: Sequence[int]
) -> None:
    """Fail, naming the row, position and id, when a response ``(bs, R)`` holds an image/video placeholder id
    within ``response_mask (bs, R)``.

    Such a token has no image features behind it: the model's forward would stop with transformers' "Image features
    and image tokens do not match" (issue 21: session 5's GPU run, whose HF rollout did not ban them yet). Every
    rollout bans them (``vision_placeholder_ids``); this names the culprit when one still gets through."""
    if not placeholder_ids or responses.numel() == 0:
        return
    ids = torch.as_tensor(list(placeholder_ids), device=responses.device)
    bad = torch.isin(responses, ids) & response_mask.bool()
    if not bool(bad.any()):
        return
    row, position = (int(v) for v in torch.nonzero(bad)[0])
    raise ValueError(
        f"response of row {row} holds the vision placeholder id {int(responses[row, position])} at response position "
        f"{position} ({int(bad.sum())} such tokens in the batch): it has no image behind it, so the model cannot "
        "take it. The rollout must never sample the model's image_token_id/video_token_id (the hf, vllm and sglang "
        "rollouts ban them: verl.workers.rollout.sampling.vision_placeholder_ids); an engine or server that does not "
        "needs that ban"
    )

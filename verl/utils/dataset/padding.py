"""Fitting a prompt's token ids into ``max_prompt_length``: truncation and left padding."""

from __future__ import annotations

import torch

TRUNCATION_MODES = ("error", "left", "right", "middle")


def truncate_ids(ids: list[int], max_length: int, truncation: str) -> list[int]:
    """Shorten ``ids`` to ``max_length``: keep the end (left), the start (right) or both halves (middle).

    ``middle`` keeps the first ``max_length // 2`` and the last ``max_length - max_length // 2`` tokens.
    ``error`` raises instead.
    """
    if len(ids) <= max_length:
        return ids
    if truncation == "left":
        return ids[len(ids) - max_length :]
    if truncation == "right":
        return ids[:max_length]
    if truncation == "middle":
        head = max_length // 2
        return ids[:head] + ids[len(ids) - (max_length - head) :]
    if truncation == "error":
        raise ValueError(
            f"prompt of {len(ids)} tokens is longer than data.max_prompt_length={max_length}; set "
            "data.filter_overlong_prompts=true to drop such prompts or data.truncation=left|right|middle"
        )
    raise ValueError(f"data.truncation={truncation!r}; choose one of {TRUNCATION_MODES}")


def left_pad(ids: list[int], max_length: int, pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask, position_ids)``, each ``(max_length,)``, with the padding on the left.

    Positions count valid tokens from 0: ``position_ids = clip(cumsum(attention_mask) - 1, min=0)``.
    """
    padding = max_length - len(ids)
    input_ids = torch.tensor([pad_token_id] * padding + list(ids), dtype=torch.long)
    attention_mask = torch.tensor([0] * padding + [1] * len(ids), dtype=torch.long)
    position_ids = torch.clip(torch.cumsum(attention_mask, dim=-1) - 1, min=0)
    return input_ids, attention_mask, position_ids

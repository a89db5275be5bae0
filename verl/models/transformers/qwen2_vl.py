"""Qwen2-VL / Qwen2.5-VL multimodal rotary position ids (M-RoPE), computed once per prompt.

Each token gets three position ids (temporal, height, width). Text tokens use the same running position in
all three. The ``t * h * w / merge**2`` placeholder tokens of an image or video starting at running position
``s`` get ``(s + t * time_scale, s + row, s + column)`` over the merged patch grid, and the text after it
continues at ``1 + `` the largest id of the block (Wang et al. 2024, "Qwen2-VL", sec. 2.1; the same rule as
vLLM's ``get_mrope_input_positions``). ``time_scale`` is 1 for Qwen2-VL and
``second_per_grid_t * tokens_per_second`` for Qwen2.5-VL videos.

The dataset stores ``position_ids (3, P)`` per prompt; the rollout continues each response at
``last + 1, last + 2, ...`` in all three rows (what vLLM does for decoded tokens), and training feeds the
same ids to the model: ``(3, bs, S)`` padded, or ``(4, 1, T)`` packed, where row 0 is the per-sequence text
position that tells the attention where packed sequences start.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def mrope_position_ids(
    input_ids: torch.Tensor,
    image_token_id: int,
    video_token_id: int,
    spatial_merge_size: int,
    image_grid_thw: torch.Tensor | None = None,
    video_grid_thw: torch.Tensor | None = None,
    video_time_scales: Sequence[float] | None = None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(3, S)`` position ids of one sequence ``input_ids (S,)``; padding (mask 0) positions are 0.

    ``image_grid_thw (num_images, 3)`` / ``video_grid_thw (num_videos, 3)`` are the processor's patch grids in
    the order the images / videos appear; ``video_time_scales[i]`` multiplies video i's temporal index
    (default 1). Raises if the placeholder runs do not match the grids.
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    valid = attention_mask.bool()
    tokens = input_ids[valid].tolist()
    grids = {
        image_token_id: [tuple(int(v) for v in g) for g in (image_grid_thw if image_grid_thw is not None else [])],
        video_token_id: [tuple(int(v) for v in g) for g in (video_grid_thw if video_grid_thw is not None else [])],
    }
    used = {image_token_id: 0, video_token_id: 0}
    scales = list(video_time_scales) if video_time_scales is not None else [1.0] * len(grids[video_token_id])
    columns: list[torch.Tensor] = []
    next_position = 0
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token not in grids:
            start = index
            while index < len(tokens) and tokens[index] not in grids:
                index += 1
            columns.append(torch.arange(next_position, next_position + index - start).expand(3, -1))
            next_position += index - start
            continue
        number = used[token]
        if number >= len(grids[token]):
            kind = "image" if token == image_token_id else "video"
            raise ValueError(f"more {kind} placeholder runs than {kind} grids ({len(grids[token])})")
        t, h, w = grids[token][number]
        h, w = h // spatial_merge_size, w // spatial_merge_size
        used[token] += 1
        run = t * h * w
        if tokens[index : index + run] != [token] * run:
            raise ValueError(
                f"a vision block of grid {(t, h * spatial_merge_size, w * spatial_merge_size)} needs {run} "
                f"consecutive placeholder tokens at offset {index}"
            )
        scale = scales[number] if token == video_token_id else 1.0
        temporal = (torch.arange(t) * scale).long().view(t, 1, 1).expand(t, h, w)
        rows = torch.arange(h).view(1, h, 1).expand(t, h, w)
        cols = torch.arange(w).view(1, 1, w).expand(t, h, w)
        block = torch.stack([temporal, rows, cols]).reshape(3, -1) + next_position
        columns.append(block)
        next_position = int(block.max()) + 1
        index += run
    for token, count in used.items():
        if count != len(grids[token]):
            raise ValueError(f"{len(grids[token])} grids for token {token} but {count} placeholder runs")
    positions = torch.zeros(3, input_ids.shape[0], dtype=torch.long)
    if columns:
        positions[:, valid] = torch.cat(columns, dim=1)
    return positions


def get_rope_index(
    processor,
    input_ids: torch.Tensor,
    image_grid_thw: torch.Tensor | None = None,
    video_grid_thw: torch.Tensor | None = None,
    second_per_grid_ts: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    tokens_per_second: float = 2.0,
) -> torch.Tensor:
    """verl's entry point: :func:`mrope_position_ids` with the token ids and merge size of ``processor``.

    ``second_per_grid_ts`` (Qwen2.5-VL's processor returns it for videos) makes the temporal step
    ``second_per_grid_t * tokens_per_second``; without it a video's temporal index steps by 1 (Qwen2-VL).
    """
    tokenizer = processor.tokenizer
    image_token_id = getattr(processor, "image_token_id", None) or tokenizer.convert_tokens_to_ids("<|image_pad|>")
    video_token_id = getattr(processor, "video_token_id", None) or tokenizer.convert_tokens_to_ids("<|video_pad|>")
    scales = None
    if second_per_grid_ts is not None:
        scales = [float(s) * tokens_per_second for s in torch.as_tensor(second_per_grid_ts).flatten().tolist()]
    return mrope_position_ids(
        input_ids,
        image_token_id=image_token_id,
        video_token_id=video_token_id,
        spatial_merge_size=int(processor.image_processor.merge_size),
        image_grid_thw=image_grid_thw,
        video_grid_thw=video_grid_thw,
        video_time_scales=scales,
        attention_mask=attention_mask,
    )


def is_mrope(position_ids: torch.Tensor) -> bool:
    """True for batched M-RoPE ids ``(bs, 3, S)`` (plain ids are ``(bs, S)``)."""
    return position_ids.dim() == 3


def padded_model_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Batch-first ids as the model takes them: ``(bs, 3, S) -> (3, bs, S)``; ``(bs, S)`` unchanged."""
    return position_ids.transpose(0, 1) if is_mrope(position_ids) else position_ids


def packed_model_position_ids(packed_position_ids: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Packed M-RoPE ids ``(3, 1, T)`` with the text positions prepended: ``(4, 1, T)``.

    Row 0 restarts at 0 for each packed sequence (boundaries ``cu_seqlens (n + 1,)``); transformers builds the
    block-diagonal (or varlen) attention from it, since M-RoPE ids themselves jump inside a sequence.
    """
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    text = torch.cat([torch.arange(n, device=packed_position_ids.device) for n in lengths if n > 0])
    return torch.cat([text.view(1, 1, -1).to(packed_position_ids.dtype), packed_position_ids], dim=0)

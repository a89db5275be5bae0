"""Prompt checks before an engine sees a batch, and the assembly of the rollout output batch.

Both backends share these, so an over-long, empty or out-of-vocabulary prompt fails the same way in ``hf`` and
``vllm`` (a ``ValueError`` naming the row and the key to change) and never inside an engine.
"""

from __future__ import annotations

import itertools

import torch

from verl.protocol import DataProto

PROMPT_KEYS = ("input_ids", "attention_mask", "position_ids")


def check_prompts(
    prompts: DataProto, prompt_length: int, response_length: int, max_model_len: int | None, vocab_size: int | None
) -> list[list[int]]:
    """Validate a left-padded prompt batch and return each row's real token ids (padding stripped).

    Rules: ``input_ids`` and ``attention_mask`` are ``(bs, P)``; the mask is left padding (``0..0 1..1``);
    every row has 1 <= length <= ``prompt_length``; ``length + response_length <= max_model_len``;
    every id is in ``[0, vocab_size)``. A text with an unknown special token such as ``<|foo|>`` is not an error:
    the tokenizer splits it into ordinary tokens before it gets here (documented in docs/rollout.md).
    """
    if prompts.batch is None or any(key not in prompts.batch.keys() for key in ("input_ids", "attention_mask")):
        raise ValueError("rollout: the prompt batch needs tensors 'input_ids' and 'attention_mask' (bs, prompt_len)")
    input_ids = prompts.batch["input_ids"]
    attention_mask = prompts.batch["attention_mask"]
    if input_ids.dim() != 2 or input_ids.shape != attention_mask.shape:
        raise ValueError(
            f"rollout: input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} "
            "must both be (bs, prompt_len)"
        )
    mask = attention_mask.bool().cpu()
    lengths = mask.sum(dim=1)
    left_padded = mask.int().cummax(dim=1).values.bool() == mask  # once a real token starts, no more padding
    for row in range(input_ids.shape[0]):
        length = int(lengths[row])
        if length == 0:
            raise ValueError(f"rollout: prompt row {row} is empty (attention_mask is all zeros); drop empty prompts")
        if not bool(left_padded[row].all()):
            raise ValueError(f"rollout: prompt row {row} is not left-padded; the rollout expects left padding")
        if length > prompt_length:
            raise ValueError(
                f"rollout: prompt row {row} has {length} tokens > rollout.prompt_length={prompt_length}; "
                "raise data.max_prompt_length / rollout.prompt_length or set data.filter_overlong_prompts"
            )
        if max_model_len is not None and length + response_length > max_model_len:
            raise ValueError(
                f"rollout: prompt row {row} has {length} tokens + response_length={response_length} > "
                f"rollout.max_model_len={max_model_len}; raise rollout.max_model_len or shorten the prompt"
            )
    ids = input_ids.cpu()
    real_ids = ids[mask]
    if vocab_size is not None and real_ids.numel() and (int(real_ids.min()) < 0 or int(real_ids.max()) >= vocab_size):
        bad = ((ids < 0) | (ids >= vocab_size)) & mask
        row, col = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"rollout: prompt row {row} has token id {int(ids[row, col])} outside the vocabulary [0, {vocab_size}); "
            "tokenize prompts with the model's own tokenizer"
        )
    return [ids[row][mask[row]].tolist() for row in range(ids.shape[0])]


def right_pad(rows: list[list[float]] | list[list[int]], length: int, value: float | int, dtype: torch.dtype):
    """``(len(rows), length)`` tensor of ``rows`` right-padded with ``value`` (rows longer than ``length`` are cut)."""
    return _right_pad_and_fill(rows, length, value, dtype)[0]


def _right_pad_and_fill(
    rows: list[list[float]] | list[list[int]], length: int, value: float | int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`right_pad` and its ``(len(rows), length)`` bool mask of the filled cells: one tensor built from all rows
    at once (a tensor per row cost 9 ms for the GRPO benchmark's 256 responses on a 2-core CPU; this, 4 ms)."""
    cut = [row[:length] for row in rows]
    lengths = torch.tensor([len(row) for row in cut], dtype=torch.long)
    filled = torch.arange(length) < lengths[:, None]
    out = torch.full((len(cut), length), value, dtype=dtype)
    out[filled] = torch.tensor(list(itertools.chain.from_iterable(cut)), dtype=dtype)
    return out, filled


def pad_responses(
    token_rows: list[list[int]], log_prob_rows: list[list[float]] | None, response_length: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """An engine's per-row response tokens (and their log-probs, if it returned them) as right-padded tensors:
    ``responses (rows, R)`` padded with ``pad_id``, ``response_mask (rows, R)`` and ``rollout_log_probs (rows, R)``
    (0 on padding; None when ``log_prob_rows`` is None)."""
    responses, filled = _right_pad_and_fill(token_rows, response_length, pad_id, torch.long)
    response_mask = filled.long()
    log_probs = None if log_prob_rows is None else right_pad(log_prob_rows, response_length, 0.0, torch.float32)
    return responses, response_mask, log_probs


def assemble_output(
    prompts: DataProto,
    n: int,
    responses: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_log_probs: torch.Tensor | None,
) -> DataProto:
    """Build the rollout batch from ``bs`` prompts and ``bs * n`` responses (prompt i's samples at rows i*n..i*n+n-1).

    Shapes: ``responses``, ``response_mask``, ``rollout_log_probs``: ``(bs*n, R)`` (``rollout_log_probs`` is left
    out of the batch when None: the engine was not asked for log-probs). Output ``prompts (bs*n, P)``,
    ``input_ids = [prompts, responses]``, ``attention_mask = [prompt mask, response_mask]`` and
    ``position_ids = [prompt positions, last prompt position + 1..R]``, all ``(bs*n, P+R)``; M-RoPE position ids
    ``(bs*n, 3, P)`` continue the same way in each of their three rows, giving ``(bs*n, 3, P+R)``. Other tensors and
    every non-tensor field of the prompt batch are repeated ``n`` times (``repeat(interleave=True)``).
    """
    repeated = prompts.repeat(n, interleave=True) if n > 1 else prompts
    device = repeated.batch["input_ids"].device
    prompt_ids = repeated.batch["input_ids"]
    prompt_mask = repeated.batch["attention_mask"]
    if "position_ids" in repeated.batch.keys():
        prompt_positions = repeated.batch["position_ids"]
    else:
        prompt_positions = torch.clip(torch.cumsum(prompt_mask, dim=-1) - 1, min=0)
    if prompt_positions.dim() not in (2, 3):
        raise ValueError(f"rollout: position_ids must be (bs, P) or (bs, 3, P); got {tuple(prompt_positions.shape)}")
    response_length = responses.shape[1]
    delta = torch.arange(1, response_length + 1, device=device, dtype=prompt_positions.dtype)
    response_positions = prompt_positions[..., -1:] + delta
    responses = responses.to(device=device, dtype=prompt_ids.dtype)
    response_mask = response_mask.to(device=device, dtype=prompt_mask.dtype)

    tensors = {key: repeated.batch[key] for key in repeated.batch.keys() if key not in PROMPT_KEYS}
    tensors.update(
        prompts=prompt_ids,
        responses=responses,
        input_ids=torch.cat([prompt_ids, responses], dim=-1),
        attention_mask=torch.cat([prompt_mask, response_mask], dim=-1),
        position_ids=torch.cat([prompt_positions, response_positions], dim=-1),
        response_mask=response_mask,
    )
    if rollout_log_probs is not None:
        tensors["rollout_log_probs"] = rollout_log_probs.to(device=device, dtype=torch.float32)
    return DataProto.from_dict(
        tensors=tensors, non_tensors=dict(repeated.non_tensor_batch), meta_info=dict(prompts.meta_info)
    )

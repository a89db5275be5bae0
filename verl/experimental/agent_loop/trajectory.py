"""Padding agent-loop outputs into the rollout batch the trainer consumes (the same keys as ``mode=sync``).

For prompt ``[p1 p2]`` and response ``[a1 a2 | t1 t2 | a3 <eos>]`` (model, tool, model tokens), ``P = 4``, ``R = 8``::

    prompts         [pad pad p1 p2]
    responses       [a1 a2 t1 t2 a3 eos pad pad]
    response_mask   [1  1  0  0  1  1   0   0  ]      1 only where the model sampled the token
    attention_mask  [0 0 1 1 | 1 1 1 1 1 1 0 0]      every real token, tool tokens included
    position_ids    [0 0 0 1 | 2 3 4 5 6 7 8 9]      prompt positions, then counting on (as in sync)
    rollout_log_probs: engine log-prob on model tokens, 0 elsewhere (only when every trajectory has log-probs,
                       i.e. with rollout.calculate_log_probs, as in sync)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.protocol import DataProto
from verl.workers.rollout.batch import right_pad


def left_pad(rows: list[list[int]], length: int, value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` of shape ``(len(rows), length)``, each row right-aligned; rows longer than ``length`` fail."""
    ids = torch.full((len(rows), length), value, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        if len(row) > length:
            raise ValueError(
                f"an agent loop returned a prompt of {len(row)} tokens, more than rollout.prompt_length={length}"
            )
        if row:
            ids[i, length - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, length - len(row) :] = 1
    return ids, mask


def object_column(values: list[Any]) -> np.ndarray:
    """A 1-D object array (element by element, so equal-length lists stay lists)."""
    column = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        column[i] = value
    return column


def build_rollout_batch(
    outputs: list[AgentLoopOutput],
    prompt_length: int,
    response_length: int,
    pad_token_id: int,
    non_tensors: dict[str, np.ndarray] | None = None,
) -> DataProto:
    """The rollout batch of ``outputs`` (see the module docstring), with ``non_tensors`` (the input rows' fields)
    passed through and ``__num_turns__`` plus every key of the outputs' ``extra_fields`` added (None where a
    trajectory lacks one)."""
    for index, output in enumerate(outputs):
        if len(output.response_mask) != len(output.response_ids):
            raise ValueError(f"agent loop output {index}: response_mask and response_ids differ in length")
    prompts, prompt_mask = left_pad([o.prompt_ids for o in outputs], prompt_length, pad_token_id)
    responses = right_pad([o.response_ids for o in outputs], response_length, pad_token_id, torch.long)
    response_mask = right_pad([o.response_mask for o in outputs], response_length, 0, torch.long)
    response_attention = right_pad([[1] * len(o.response_ids) for o in outputs], response_length, 0, torch.long)
    prompt_positions = torch.clip(torch.cumsum(prompt_mask, dim=-1) - 1, min=0)
    response_positions = prompt_positions[:, -1:] + torch.arange(1, response_length + 1)
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": response_mask * response_attention,
        "input_ids": torch.cat([prompts, responses], dim=-1),
        "attention_mask": torch.cat([prompt_mask, response_attention], dim=-1),
        "position_ids": torch.cat([prompt_positions, response_positions], dim=-1),
    }
    if all(o.response_logprobs is not None for o in outputs):
        rows = [o.response_logprobs for o in outputs]
        tensors["rollout_log_probs"] = right_pad(rows, response_length, 0.0, torch.float32)
    columns = dict(non_tensors or {})
    columns["__num_turns__"] = np.array([o.num_turns for o in outputs], dtype=np.int32)
    for key in sorted({key for o in outputs for key in o.extra_fields}):
        columns[key] = object_column([o.extra_fields.get(key) for o in outputs])
    return DataProto.from_dict(tensors=tensors, non_tensors=columns)

"""What the reward model reads: the policy's own tokens, or the chat re-rendered with the reward model's tokenizer.

A policy batch holds left-padded ``prompts (bs, P)``, right-padded ``responses (bs, R)`` and ``attention_mask
(bs, P + R)``. Without an input tokenizer those tokens go to the reward model unchanged. With one (the policy's
tokenizer differs from the reward model's), each sample's chat is rebuilt as ``raw_prompt`` plus an assistant
turn holding the response decoded with the input tokenizer (special tokens dropped), rendered with the reward
model's chat template (no generation prompt), tokenized without extra special tokens, cut to its last
``max_length`` tokens and right-padded. Either way the score is read at each row's last valid token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from verl.protocol import DataProto


@dataclass
class RewardInputs:
    """Reward-model inputs, each ``(bs, S)``, plus how many rows lost their start to ``max_length``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    num_truncated: int = 0


def policy_token_inputs(data: DataProto) -> RewardInputs:
    """The batch's own ``input_ids``, ``attention_mask`` and ``position_ids`` (reward model shares the vocabulary)."""
    batch = data.batch
    return RewardInputs(batch["input_ids"], batch["attention_mask"], batch["position_ids"])


def reward_chats(data: DataProto, input_tokenizer) -> list[list[dict]]:
    """Per sample: the prompt's chat messages plus the decoded response as the assistant turn."""
    if "raw_prompt" not in data.non_tensor_batch:
        raise KeyError(
            "re-rendering the chat for the reward model (reward_model.model.input_tokenizer is set) needs the raw "
            "chat messages: set data.return_raw_chat=True, or reward_model.model.input_tokenizer=null when the "
            "reward model shares the policy's tokenizer"
        )
    responses = data.batch["responses"]
    response_mask = data.batch["attention_mask"][:, -responses.shape[-1] :]
    chats = []
    for i, messages in enumerate(data.non_tensor_batch["raw_prompt"]):
        valid = responses[i][response_mask[i].bool()]
        response = input_tokenizer.decode(valid.tolist(), skip_special_tokens=True)
        chats.append([dict(message) for message in messages] + [{"role": "assistant", "content": response}])
    return chats


def rerendered_inputs(data: DataProto, input_tokenizer, reward_tokenizer, max_length: int) -> RewardInputs:
    """Re-render every chat with ``reward_tokenizer``'s chat template (see module doc), right-padded."""
    rows, num_truncated = [], 0
    for chat in reward_chats(data, input_tokenizer):
        text = reward_tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
        ids = reward_tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > max_length:
            ids, num_truncated = ids[-max_length:], num_truncated + 1
        rows.append(ids)
    width = max(len(ids) for ids in rows)
    pad_id = reward_tokenizer.pad_token_id if reward_tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, ids in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[i, : len(ids)] = 1
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return RewardInputs(input_ids, attention_mask, position_ids, num_truncated)


def last_valid_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """``(bs,)`` index of each row's last 1 in ``attention_mask (bs, S)`` (0 for an all-zero row)."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.bool()).argmax(dim=-1)


def place_at_last_response_token(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``rm_scores (bs, R)``: ``scores (bs,)`` at each row's last valid response token; rows without one get none."""
    rm_scores = torch.zeros(response_mask.shape, dtype=torch.float32)
    lengths = response_mask.sum(dim=-1)
    rows = torch.nonzero(lengths > 0).flatten()
    rm_scores[rows, lengths[rows] - 1] = scores[rows].float()
    return rm_scores

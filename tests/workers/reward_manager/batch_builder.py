"""Hand-made rollout batches for the reward-manager tests: left-padded prompts, right-padded responses."""

import numpy as np
import torch

from verl.protocol import DataProto


def make_batch(tokenizer, responses, ground_truths, data_source="openai/gsm8k", prompt_len=8, response_len=24):
    """A ``DataProto`` as a rollout returns it; also the valid response length of each sample."""
    batch_size = len(responses)
    pad = tokenizer.pad_token_id
    prompts = torch.full((batch_size, prompt_len), pad)
    response_ids = torch.full((batch_size, response_len), pad)
    attention_mask = torch.zeros(batch_size, prompt_len + response_len, dtype=torch.long)
    valid_lengths = []
    for i, response in enumerate(responses):
        prompt = tokenizer.encode("Question?")
        prompts[i, prompt_len - len(prompt) :] = torch.tensor(prompt)
        attention_mask[i, prompt_len - len(prompt) : prompt_len] = 1
        ids = tokenizer.encode(response)[:response_len]
        response_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[i, prompt_len : prompt_len + len(ids)] = 1
        valid_lengths.append(len(ids))
    sources = np.empty(batch_size, dtype=object)
    reward_models = np.empty(batch_size, dtype=object)
    extra_infos = np.empty(batch_size, dtype=object)
    for i in range(batch_size):
        sources[i] = data_source if isinstance(data_source, str) else data_source[i]
        reward_models[i] = {"style": "rule", "ground_truth": ground_truths[i]}
        extra_infos[i] = {"index": i}
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": response_ids,
            "input_ids": torch.cat([prompts, response_ids], dim=1),
            "attention_mask": attention_mask,
        },
        non_tensors={"data_source": sources, "reward_model": reward_models, "extra_info": extra_infos},
    )
    return data, valid_lengths


def expected_tensor(scores, valid_lengths, response_len=24):
    """Reference placement: each score at index ``valid_length - 1`` of its row."""
    expected = torch.zeros(len(scores), response_len)
    for i, (score, length) in enumerate(zip(scores, valid_lengths)):
        if length > 0:
            expected[i, length - 1] = score
    return expected

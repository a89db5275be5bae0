"""Tiny reward models saved to a folder, a chat rollout batch, and reference scores from plain transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tests.support.models import smollm2_path, tiny_model_path
from verl.protocol import DataProto

CHATS = [
    [{"role": "user", "content": "What is 3 + 4?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name the capital of France."}],
    [{"role": "user", "content": "Say hello."}],
    [{"role": "user", "content": "Count to three."}],
]
RESPONSES = ["3 + 4 = 7", "Paris!\nIt is.", "Hello there, friend", "1, 2, 3"]
ENDS_WITH_EOS = [True, False, True, False]

VARIANT_TEMPLATE = (
    "{% for message in messages %}<|rm_turn|>{{ message['role'] }}: {{ message['content'] }}<|rm_end|>\n{% endfor %}"
)
"""The tokenizer variant's chat template: its own turn markers (added tokens), no system default."""


def save_sequence_classifier(folder: Path, tokenizer_variant: bool = False, seed: int = 1) -> str:
    """A tiny Llama ``ForSequenceClassification`` (one label, random head) with SmolLM2's tokenizer or, with
    ``tokenizer_variant``, that tokenizer plus two added tokens and :data:`VARIANT_TEMPLATE`."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    if tokenizer_variant:
        tokenizer.add_special_tokens({"additional_special_tokens": ["<|rm_turn|>", "<|rm_end|>"]})
        tokenizer.chat_template = VARIANT_TEMPLATE
    config = AutoConfig.from_pretrained(tiny_model_path("llama"))
    config.num_labels = 1
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 1.0)  # a head large enough that scores differ clearly between texts
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_value_head_lm(folder: Path, seed: int = 2) -> str:
    """A tiny Llama causal LM with a TRL-style ``v_head.summary`` (weight and bias) stored in its safetensors."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path("llama"))
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(smollm2_path()).save_pretrained(folder)
    weights_file = folder / "model.safetensors"
    state = load_file(str(weights_file))
    gen = torch.Generator().manual_seed(seed)
    state["v_head.summary.weight"] = torch.randn(1, model.config.hidden_size, generator=gen)
    state["v_head.summary.bias"] = torch.randn(1, generator=gen)
    save_file(state, str(weights_file), metadata={"format": "pt"})
    return str(folder)


def save_reward_models(tmp_path_factory) -> dict[str, str]:
    """Folders of the three reward models the role tests score: ``classifier`` (SmolLM2's tokenizer),
    ``variant`` (its own tokenizer and chat template) and ``value_head`` (a causal LM with a TRL value head)."""
    return {
        "classifier": save_sequence_classifier(tmp_path_factory.mktemp("rm")),
        "variant": save_sequence_classifier(tmp_path_factory.mktemp("rm_variant"), tokenizer_variant=True),
        "value_head": save_value_head_lm(tmp_path_factory.mktemp("vhead")),
    }


def chat_batch(prompt_length: int = 48, response_length: int = 12) -> DataProto:
    """The :data:`CHATS` with :data:`RESPONSES` as a policy rollout batch (SmolLM2 chat template, left-padded
    prompts, right-padded responses, some ending in eos) with ``raw_prompt`` and ``data_source``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    pad = tokenizer.pad_token_id
    rows = len(CHATS)
    prompts = torch.full((rows, prompt_length), pad)
    responses = torch.full((rows, response_length), pad)
    prompt_mask = torch.zeros((rows, prompt_length), dtype=torch.long)
    response_mask = torch.zeros((rows, response_length), dtype=torch.long)
    for i, (chat, response, eos) in enumerate(zip(CHATS, RESPONSES, ENDS_WITH_EOS)):
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] * eos)
        assert len(prompt_ids) <= prompt_length and len(response_ids) <= response_length
        prompts[i, prompt_length - len(prompt_ids) :] = torch.tensor(prompt_ids)
        prompt_mask[i, prompt_length - len(prompt_ids) :] = 1
        responses[i, : len(response_ids)] = torch.tensor(response_ids)
        response_mask[i, : len(response_ids)] = 1
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    raw_prompt = np.empty(rows, dtype=object)
    for i, chat in enumerate(CHATS):
        raw_prompt[i] = chat
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
        },
        non_tensors={"raw_prompt": raw_prompt, "data_source": np.array(["chat"] * rows, dtype=object)},
    )


def sequence_classifier_score(model, input_ids: list[int]) -> float:
    """A plain ``AutoModelForSequenceClassification`` score of one unpadded sequence (its last token)."""
    model.config.pad_token_id = None  # one sequence, no padding: score the last token
    with torch.no_grad():
        return float(model(input_ids=torch.tensor([input_ids])).logits[0, 0])


def expected_rm_scores(batch: DataProto, scores: list[float]) -> torch.Tensor:
    """``(bs, R)`` zeros with ``scores[i]`` at row i's last valid response token."""
    response_length = batch.batch["responses"].shape[1]
    mask = batch.batch["attention_mask"][:, -response_length:]
    out = torch.zeros(mask.shape)
    for i, score in enumerate(scores):
        out[i, int(mask[i].sum()) - 1] = score
    return out


SCORE_ATOL = 2e-5
"""A score is a float32 dot product over a 64-wide hidden state after two tiny layers; padded/packed or
tensor-parallel vs single-sequence forwards reorder sums of ~50 terms of magnitude ~1, an error of a few 1e-6."""


def policy_token_reference(path: str, batch: DataProto) -> list[float]:
    """Plain ``AutoModelForSequenceClassification`` scores of each row's valid policy tokens."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    mask = batch.batch["attention_mask"].bool()
    return [sequence_classifier_score(model, batch.batch["input_ids"][i][mask[i]].tolist()) for i in range(len(batch))]


def rerendered_reference(path: str) -> list[float]:
    """Plain transformers scores of each chat plus its response, rendered with the reward model's own template."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    scores = []
    for chat, response in zip(CHATS, RESPONSES):
        messages = chat + [{"role": "assistant", "content": response}]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert tokenizer.convert_tokens_to_ids("<|rm_turn|>") in ids  # the reward model's own template
        scores.append(sequence_classifier_score(model, ids))
    return scores


def value_head_reference(path: str, batch: DataProto) -> list[float]:
    """Each row's final hidden state (plain causal LM, valid tokens only) times the saved ``v_head.summary``."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    state = load_file(f"{path}/model.safetensors")
    weight, bias = state["v_head.summary.weight"], state["v_head.summary.bias"]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    mask = batch.batch["attention_mask"].bool()
    scores = []
    with torch.no_grad():
        for i in range(len(batch)):
            ids = batch.batch["input_ids"][i][mask[i]]
            hidden = model(input_ids=ids[None], output_hidden_states=True).hidden_states[-1][0, -1]
            scores.append(float(hidden @ weight[0] + bias[0]))
    return scores

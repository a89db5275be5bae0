"""A hand-built multi-turn trajectory through the real pieces: the FSDP actor (one gloo rank), the vLLM engine
synced from it, the async server and the agent loop's batch assembly.

model turn (sampled by the server) -> a tool turn written by hand (the chat template's tool message) -> model turn
(sampled continuing the whole conversation). Checked: the tool tokens carry ``response_mask`` 0 and log-prob 0,
the model tokens' engine log-probs equal the actor's own recomputation (``compute_log_prob``, the trainer's
``old_log_probs``), and the policy loss has no gradient at the tool tokens.
"""

from __future__ import annotations

import pytest
import torch

from tests.workers.rollout.helpers import load_tokenizer, vllm_tiny_path
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.chat import ChatTemplate
from verl.experimental.agent_loop.trajectory import build_rollout_batch
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.actor.roles import ActorRole
from verl.workers.config import FSDPActorConfig, HFModelConfig, RolloutConfig
from verl.workers.rollout import build_rollout
from verl.workers.rollout.async_server import get_async_server_class
from verl.workers.rollout.vllm_rollout.engine_args import ensure_process_group

TEMPERATURE = 0.8
PROMPT_LENGTH, RESPONSE_LENGTH = 48, 40


@pytest.fixture(scope="module")
def pieces():
    path = vllm_tiny_path()
    tokenizer = load_tokenizer(path)
    owns_group = ensure_process_group()
    actor = ActorRole(
        HFModelConfig(path=path, use_remove_padding=True, enable_gradient_checkpointing=False),
        FSDPActorConfig(),
        tokenizer,
    )
    config = RolloutConfig(
        name="vllm",
        mode="async",
        dtype="float32",
        prompt_length=PROMPT_LENGTH,
        response_length=RESPONSE_LENGTH,
        max_model_len=PROMPT_LENGTH + RESPONSE_LENGTH,
        gpu_memory_utilization=0.05,
        max_num_seqs=8,
    )
    rollout, manager = build_rollout(config, HFModelConfig(path=path), tokenizer, actor.module)
    server = get_async_server_class("vllm")(rollout)
    manager.__enter__()  # weights from the FSDP actor (load_format=dummy)
    server.start()
    yield actor, server, tokenizer
    server.stop()
    manager.__exit__(None, None, None)
    rollout.shutdown()
    if owns_group and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def hand_built_trajectory(server, tokenizer) -> tuple[AgentLoopOutput, range]:
    chat = ChatTemplate(tokenizer)
    prompt = chat.prompt_ids([{"role": "user", "content": "What is 12 + 7? Use the calculator."}])
    sampling = {"temperature": TEMPERATURE, "max_tokens": 12}
    first = server.generate(prompt, sampling, "trajectory")
    tool = chat.turn_ids([{"role": "tool", "content": "19"}])
    second = server.generate(prompt + first.token_ids + tool, sampling, "trajectory")
    response = first.token_ids + tool + second.token_ids
    output = AgentLoopOutput(
        prompt_ids=prompt,
        response_ids=response,
        response_mask=[1] * len(first.token_ids) + [0] * len(tool) + [1] * len(second.token_ids),
        response_logprobs=first.log_probs + [0.0] * len(tool) + second.log_probs,
        num_turns=4,
    )
    return output, range(len(first.token_ids), len(first.token_ids) + len(tool))


def test_tool_tokens_are_masked_and_model_log_probs_match_the_actor(pieces):
    actor, server, tokenizer = pieces
    outputs = [hand_built_trajectory(server, tokenizer) for _ in range(3)]
    batch = build_rollout_batch([o for o, _ in outputs], PROMPT_LENGTH, RESPONSE_LENGTH, tokenizer.pad_token_id)
    response_mask = batch.batch["response_mask"]
    for row, (_, tool_positions) in enumerate(outputs):
        assert response_mask[row, list(tool_positions)].sum() == 0
        assert batch.batch["rollout_log_probs"][row, list(tool_positions)].abs().sum() == 0
        # the tool tokens are real tokens of the sequence: attended, not padding
        assert batch.batch["attention_mask"][row, PROMPT_LENGTH:][list(tool_positions)].all()
    meta = {"micro_batch_size": 2, "use_dynamic_bsz": False, "max_token_len": 4096, "temperature": TEMPERATURE}
    old_log_probs, _ = actor.compute_log_prob(batch, meta, calculate_entropy=False)
    model_tokens = response_mask.bool()
    diff = (old_log_probs - batch.batch["rollout_log_probs"])[model_tokens].abs()
    print(f"engine vs actor log-probs ({int(model_tokens.sum())} tokens): mean {diff.mean():.2e} max {diff.max():.2e}")
    assert diff.mean().item() < 1e-3 and diff.max().item() < 1e-2  # both float32; same bound as the sync rollout

    # the loss only sees model tokens: its gradient w.r.t. the log-probs of tool tokens is exactly zero
    log_probs = old_log_probs.clone().requires_grad_(True)
    advantages = torch.ones_like(log_probs)
    loss = get_policy_loss_fn("vanilla")(
        old_log_prob=old_log_probs,
        log_prob=log_probs,
        advantages=advantages,
        response_mask=response_mask,
        config=FSDPActorConfig(),
    )[0]
    loss.backward()
    assert (log_probs.grad[~model_tokens] == 0).all() and (log_probs.grad[model_tokens] != 0).all()

"""ToolAgentLoop's control flow, driven by a scripted policy (the model's turns are given as text).

The real tools, interactions, chat template (SmolLM2's) and parser run; only the model's choices are fixed, so each
test knows which turn comes when. Checked: what goes into the response and with which mask and log-probs, what the
next request's prompt is, every limit (turns, parallel calls, response budget, tool-response length), malformed and
unknown calls turned into error messages, a hanging code tool ending in an error while the rollout goes on, the
gsm8k tool's per-trajectory state and the gsm8k interaction.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.support.models import smollm2_path
from verl.experimental.agent_loop.agent_loop import TrainerConfigRef
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.trainer.config.loader import load_config
from verl.workers.rollout.async_server import TokenOutput

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / "examples" / "agent_loop" / "config"
CALCULATOR = CONFIGS / "tool_config" / "calculator_tool_config.yaml"
GSM8K_TOOL = CONFIGS / "tool_config" / "gsm8k_tool_config.yaml"
INTERACTION = CONFIGS / "interaction_config" / "gsm8k_interaction_config.yaml"
QUESTION = [{"role": "user", "content": "What is 12 + 7?"}]


def call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_path())


class ScriptedPolicy:
    """Answers request k with the k-th scripted text (its canonical ids, then EOS); log-prob of token j is
    ``-(j + 1) / 100``. A text beyond ``max_tokens`` is cut and reported as ``length``. Records every request."""

    def __init__(self, tokenizer, turns: list[str]):
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.requests: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None):
        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        ids = self.tokenizer(self.turns.pop(0), add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        budget = sampling_params["max_tokens"]
        reason = "stop" if len(ids) <= budget else "length"
        ids = ids[:budget]
        return TokenOutput(token_ids=ids, log_probs=[-(j + 1) / 100 for j in range(len(ids))], stop_reason=reason)


def run_loop(tokenizer, turns, overrides=(), messages=QUESTION, **row):
    config = load_config(
        [
            "actor_rollout_ref.rollout.mode=async",
            "data.return_raw_chat=True",
            "data.max_prompt_length=320",
            "data.max_response_length=160",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            *overrides,
        ],
        config_name="ppo_demo",  # GRPO, fp32 rollout, packed sequences batched by tokens
    )
    loop_cls = type("IsolatedToolAgentLoop", (ToolAgentLoop,), {})  # class-level set-up per test config
    policy = ScriptedPolicy(tokenizer, turns)

    async def go():
        loop = loop_cls(TrainerConfigRef(config), policy, tokenizer, None)
        return await loop.run({"temperature": 1.0}, raw_prompt=messages, **row)

    return asyncio.run(go()), policy, loop_cls


def decode(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False)


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """``(value, length)`` runs of a mask."""
    runs: list[tuple[int, int]] = []
    for value in mask:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


def test_tool_call_result_is_masked_and_the_next_turn_sees_it(tokenizer):
    turns = [call("calculator", expression="12 + 7"), "#### 19"]
    output, policy, loop_cls = run_loop(
        tokenizer, turns, [f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}"]
    )
    first = tokenizer(turns[0], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    second = tokenizer(turns[1], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    tool_ids = output.response_ids[len(first) : len(output.response_ids) - len(second)]
    assert decode(tokenizer, tool_ids) == "\n<|im_start|>tool\n19<|im_end|>\n<|im_start|>assistant\n"
    assert output.response_ids == first + tool_ids + second
    assert spans(output.response_mask) == [(1, len(first)), (0, len(tool_ids)), (1, len(second))]
    expected_log_probs = [-(j + 1) / 100 for j in range(len(first))] + [0.0] * len(tool_ids)
    assert output.response_logprobs == expected_log_probs + [-(j + 1) / 100 for j in range(len(second))]
    assert policy.requests[1]["prompt_ids"] == output.prompt_ids + first + tool_ids  # the conversation so far
    assert policy.requests[0]["request_id"] == policy.requests[1]["request_id"]  # one session: same replica
    assert policy.requests[0]["max_tokens"] == 160 and policy.requests[1]["max_tokens"] == 160 - len(first + tool_ids)
    assert output.num_turns == 4  # the user's question, two model turns, one tool turn
    assert output.extra_fields["num_tool_calls"] == 1 and output.extra_fields["num_tool_errors"] == 0
    assert output.extra_fields["tokenization_mismatch"] == 0.0
    assert "You can call tools." in decode(tokenizer, output.prompt_ids)  # SmolLM2's template has no tools


def test_malformed_and_unknown_calls_become_error_messages(tokenizer):
    bad = "<tool_call>{not json}</tool_call>\n" + call("weather", city="Paris")
    output, _, _ = run_loop(
        tokenizer,
        [bad, "#### 19"],
        [
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}",
            "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=2",
        ],
    )
    text = decode(tokenizer, output.response_ids)
    assert "Error: the tool call is not valid JSON" in text
    assert "Error: unknown tool 'weather'; available: ['calculator']" in text
    assert text.endswith("#### 19<|im_end|>")  # the model got its next turn
    assert output.extra_fields["num_tool_errors"] == 2 and output.extra_fields["num_tool_calls"] == 0


def test_turn_and_parallel_call_limits(tokenizer):
    two_calls = call("calculator", expression="1 + 1") + "\n" + call("calculator", expression="2 + 2")
    path = f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}"
    output, _, _ = run_loop(tokenizer, [two_calls, "#### 2"], [path])  # max_parallel_calls defaults to 1
    text = decode(tokenizer, output.response_ids)
    assert "<|im_start|>tool\n2<|im_end|>" in text and "<|im_start|>tool\n4" not in text
    assert output.extra_fields["num_tool_calls"] == 1

    limited = [path, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=1"]
    output, policy, _ = run_loop(tokenizer, [call("calculator", expression="1 + 1"), "never"], limited)
    assert len(policy.requests) == 1 and set(output.response_mask) == {1}

    limited = [path, "actor_rollout_ref.rollout.multi_turn.max_user_turns=1"]
    turns = [call("calculator", expression="1 + 1"), call("calculator", expression="2 + 2"), "never"]
    output, policy, _ = run_loop(tokenizer, turns, limited)
    assert len(policy.requests) == 2 and output.num_turns == 4  # one tool turn, then the second call is not run


def test_response_budget_and_tool_response_length(tokenizer):
    overrides = [
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}",
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=10",
        "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=left",
    ]
    output, _, _ = run_loop(tokenizer, [call("calculator", expression="10 ** 60"), "#### 9"], overrides)
    assert "<|im_start|>tool\n1000000000...(truncated)<|im_end|>" in decode(tokenizer, output.response_ids)

    # budget: after a 40-token first turn only ~10 tokens are left, fewer than the tool turn needs
    short = [f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}", "data.max_response_length=50"]
    first = call("calculator", expression="12 + 7")
    output, policy, _ = run_loop(tokenizer, [first + " " + "and so on " * 4, "never"], short)
    assert len(policy.requests) == 1 and len(output.response_ids) <= 50 and set(output.response_mask) == {1}

    # a turn cut by max_tokens (no EOS) ends the trajectory even with a call in it
    output, policy, _ = run_loop(tokenizer, ["word " * 60 + first, "never"], short)
    assert len(policy.requests) == 1 and len(output.response_ids) == 50


def test_gsm8k_tool_keeps_state_for_the_trajectory(tokenizer):
    turns = [call("calc_gsm8k_reward", answer="70"), call("calc_gsm8k_reward", answer="72"), "#### 72"]
    output, _, loop_cls = run_loop(
        tokenizer,
        turns,
        [f"actor_rollout_ref.rollout.multi_turn.tool_config_path={GSM8K_TOOL}"],
        tools_kwargs={"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "72"}}},
    )
    text = decode(tokenizer, output.response_ids)
    assert "answer='70' reward=0.0" in text and "answer='72' reward=1.0" in text
    assert output.extra_fields["tool_rewards"] == [-0.05, 0.0]  # no improvement, then improvement
    assert loop_cls.tools["calc_gsm8k_reward"]._instance_dict == {}  # released at the end


def test_gsm8k_interaction_asks_again_until_right(tokenizer):
    overrides = [f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={INTERACTION}"]
    kwargs = {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "72"}}
    output, policy, _ = run_loop(tokenizer, ["#### 70", "#### 72", "never"], overrides, **kwargs)
    text = decode(tokenizer, output.response_ids)
    assert "<|im_start|>user\nYour response is incorrect!" in text
    assert text.endswith("#### 72<|im_end|>")  # the episode ends on the model's turn
    assert len(policy.requests) == 2 and output.extra_fields["turn_scores"] == [0.0, 1.0]
    assert spans(output.response_mask)[1][0] == 0  # the user's reply is masked


ATTACKS = {  # code -> what its tool message must say (the wall-clock/CPU limit, or the Python error raised)
    "while True:\n    pass": ("Error: ",),
    "import os\nwhile True:\n    os.fork()": ("BlockingIOError", "Error: "),
    "block = bytearray(1 << 30)\nprint('allocated')": ("MemoryError",),
    "open('/tmp/verl-agent-loop-escape', 'w').write('x')": ("PermissionError",),
}


def test_code_tool_attacks_end_in_errors_and_the_rollout_goes_on(tokenizer, tmp_path):
    """Each attack is one model turn; each tool turn is an error message, and the turn after all four still runs."""
    escape = Path("/tmp/verl-agent-loop-escape")
    escape.unlink(missing_ok=True)
    config = tmp_path / "code.yaml"
    config.write_text(
        "tools:\n  - class_name: verl.tools.code_executor_tool.CodeExecutorTool\n"
        "    config: {type: native, timeout_s: 2, cpu_time_s: 2, memory_mb: 256, max_processes: 8}\n"
    )
    turns = [call("code_interpreter", code=code) for code in ATTACKS]
    turns += [call("code_interpreter", code="print(6 * 7)"), "42"]
    overrides = [
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={config}",
        "data.max_response_length=1200",
    ]
    output, policy, _ = run_loop(tokenizer, turns, overrides)
    text = decode(tokenizer, output.response_ids)
    tool_turns = [part.split("<|im_end|>")[0] for part in text.split("<|im_start|>tool\n")[1:]]
    assert len(tool_turns) == len(ATTACKS) + 1, text
    for (code, expected), reply in zip(ATTACKS.items(), tool_turns):
        assert any(word in reply for word in expected), f"{code!r} -> {reply!r}"
        assert "allocated" not in reply
    assert not escape.exists()
    assert tool_turns[-1] == "42" and text.endswith("42<|im_end|>")
    assert len(policy.requests) == len(turns)
    assert output.extra_fields["num_tool_calls"] == len(ATTACKS) + 1


def test_needs_the_chat_messages(tokenizer):
    with pytest.raises(ValueError, match="data.return_raw_chat=True"):
        config = load_config(["actor_rollout_ref.rollout.mode=async"], config_name="ppo_demo")

        async def go():
            loop = type("L", (ToolAgentLoop,), {})(
                TrainerConfigRef(config), ScriptedPolicy(tokenizer, []), tokenizer, None
            )
            await loop.run({}, raw_prompt_ids=[1, 2])

        asyncio.run(go())

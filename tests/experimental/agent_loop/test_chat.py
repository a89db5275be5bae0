"""Turn-by-turn token ids with SmolLM2's ChatML template equal the tokenization of the whole chat."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.support.models import smollm2_path
from verl.experimental.agent_loop.chat import ChatTemplate, truncate_text
from verl.experimental.agent_loop.tool_parser import HermesToolParser

SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "evaluate",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_path())


@pytest.fixture(scope="module")
def chat(tokenizer):
    return ChatTemplate(tokenizer, SCHEMAS, HermesToolParser(tokenizer).tools_prompt(SCHEMAS))


def model_turn(tokenizer, text: str) -> list[int]:
    """What the model samples for ``text``: its canonical ids and the EOS."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def test_tools_prompt_goes_into_the_system_message_of_a_template_without_tools(chat, tokenizer):
    assert chat.tools_prompt is not None and chat.after_eos == "\n"
    text = tokenizer.decode(
        chat.prompt_ids([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou can call tools.")
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    no_system = tokenizer.decode(chat.prompt_ids([{"role": "user", "content": "hi"}]))
    assert no_system.startswith("<|im_start|>system\nYou can call tools.")  # replaces the template's default


def test_turn_by_turn_ids_equal_the_whole_chat(chat, tokenizer):
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    ids = chat.prompt_ids(messages)
    for assistant, tool in (
        ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>', "5"),
        ("Let me check once more.", "5"),
    ):
        turn = model_turn(tokenizer, assistant)
        ids += turn
        messages.append({"role": "assistant", "content": chat.assistant_content(turn)})
        messages.append({"role": "tool", "content": tool})
        ids += chat.turn_ids(messages[-1:])
    assert chat.sanity_check(messages, ids, "strict")  # ends on a generation prompt
    final = model_turn(tokenizer, "#### 5")
    ids += final
    messages.append({"role": "assistant", "content": chat.assistant_content(final)})
    assert chat.sanity_check(messages, ids, "strict")
    whole = tokenizer.apply_chat_template(chat.with_tools_prompt(messages), tokenize=False)
    assert tokenizer.decode(ids) + "\n" == whole


def test_sanity_check_modes_on_a_non_canonical_tokenization(chat, tokenizer):
    messages = [{"role": "user", "content": "Say hello"}]
    ids = chat.prompt_ids(messages)
    canonical = tokenizer("hello", add_special_tokens=False)["input_ids"]
    split = [tokenizer.convert_tokens_to_ids(c) for c in "hello"]  # the same text, one character per token
    assert split != canonical
    turn = split + [tokenizer.eos_token_id]
    messages.append({"role": "assistant", "content": chat.assistant_content(turn)})
    assert not chat.sanity_check(messages, ids + turn, "strict")
    assert chat.sanity_check(messages, ids + turn, "ignore_strippable")
    assert chat.sanity_check(messages, ids + [0, 0], "disable")
    assert not chat.sanity_check(messages, ids + [tokenizer.convert_tokens_to_ids("x")], "ignore_strippable")


@pytest.mark.parametrize(
    ("side", "expected"),
    [("left", "abcd...(truncated)"), ("right", "(truncated)...ghij"), ("middle", "ab...(truncated)...ij")],
)
def test_truncate_text(side, expected):
    assert truncate_text("abcdefghij", 4, side) == expected
    assert truncate_text("abc", 4, side) == "abc"

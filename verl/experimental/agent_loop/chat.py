"""Token ids of a conversation built turn by turn, without ever re-tokenizing what the model generated.

The prompt is the chat template of the row's messages (with the tool schemas); each later turn (tool results, a
user reply) adds the template's text *between* the model's end-of-turn token and the next generation prompt. That
delta is found by rendering a fixed two-message conversation with and without the new messages, plus the
template's text after an assistant message's EOS (``"\\n"`` in ChatML). :meth:`ChatTemplate.sanity_check`
compares the ids built this way with the tokenization of the whole chat (``tokenization_sanity_check_mode``).

A template that ignores ``tools`` (SmolLM2's) would hide the tools from the model: the tool parser's instructions
(the tool schemas and the call format) are then added to the system message instead.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

_MARKER_USER = "VERL_USER_TURN"
_MARKER_ASSISTANT = "VERL_ASSISTANT_TURN"


@contextmanager
def timer(name: str, metrics: dict[str, float]):
    """Add the seconds spent in the block to ``metrics[name]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        metrics[name] = metrics.get(name, 0.0) + time.perf_counter() - start


def truncate_text(text: str, max_length: int, side: str) -> str:
    """Keep ``max_length`` characters of ``text``: the start (``left``), the end (``right``) or both (``middle``)."""
    if len(text) <= max_length:
        return text
    if side == "left":
        return text[:max_length] + "...(truncated)"
    if side == "right":
        return "(truncated)..." + text[-max_length:]
    half = max_length // 2
    return text[:half] + "...(truncated)..." + text[len(text) - (max_length - half) :]


class ChatTemplate:
    """The tokenizer's chat template, used incrementally; ``tools_prompt`` is the fallback tool instruction."""

    def __init__(
        self,
        tokenizer: Any,
        tool_schemas: list[dict[str, Any]] | None = None,
        tools_prompt: str | None = None,
        apply_chat_template_kwargs: dict[str, Any] | None = None,
    ):
        self.tokenizer = tokenizer
        self.tool_schemas = list(tool_schemas or []) or None
        self.kwargs = dict(apply_chat_template_kwargs or {})
        self.eos_text = tokenizer.eos_token or ""
        base = [{"role": "user", "content": _MARKER_USER}, {"role": "assistant", "content": _MARKER_ASSISTANT}]
        self._base = base
        self._base_text = self.render(base, add_generation_prompt=False, tools=False)
        self.after_eos = self._text_after_eos(self._base_text)
        self.tools_prompt = None
        if self.tool_schemas and not self._template_renders_tools():
            self.tools_prompt = tools_prompt
            logger.warning("the chat template ignores `tools`: the tool instructions go into the system message")

    # ------------------------------------------------------------------ rendering

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool, tools: bool = True) -> str:
        """The template's text of ``messages`` (with the tool schemas when ``tools``)."""
        kwargs = dict(self.kwargs)
        if tools and self.tool_schemas:
            kwargs["tools"] = self.tool_schemas
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, tokenize=False, **kwargs
        )

    def encode(self, text: str) -> list[int]:
        """Ids of template text (its special tokens are already in the text)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _template_renders_tools(self) -> bool:
        probe = [{"role": "user", "content": _MARKER_USER}]
        return self.render(probe, add_generation_prompt=True) != self.render(probe, True, tools=False)

    def _text_after_eos(self, base_text: str) -> str:
        """The template's text after the assistant marker's EOS (what the model's EOS does not produce)."""
        anchor = _MARKER_ASSISTANT + self.eos_text
        position = base_text.rfind(anchor)
        if not self.eos_text or position < 0:
            logger.warning("the chat template does not end an assistant turn with the EOS token; turns are joined raw")
            return ""
        return base_text[position + len(anchor) :]

    def with_tools_prompt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the fallback tool instructions in the system message (when the template needs them)."""
        if not self.tools_prompt:
            return list(messages)
        messages = [dict(message) for message in messages]
        if messages and messages[0].get("role") == "system":
            messages[0]["content"] = f"{messages[0].get('content') or ''}\n\n{self.tools_prompt}".strip()
            return messages
        return [{"role": "system", "content": self.tools_prompt}, *messages]

    # ------------------------------------------------------------------ ids

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """Ids of the prompt: the messages (tools included) and the generation prompt."""
        return self.encode(self.render(self.with_tools_prompt(messages), add_generation_prompt=True))

    def turn_ids(self, new_messages: list[dict[str, Any]]) -> list[int]:
        """Ids to append after a model turn that ended with EOS: the rest of its end-of-turn text, ``new_messages``
        and the next generation prompt."""
        full = self.render(self._base + list(new_messages), add_generation_prompt=True, tools=False)
        if not full.startswith(self._base_text):
            raise ValueError("the chat template renders earlier messages differently once more follow")
        return self.encode(self.after_eos + full[len(self._base_text) :])

    def assistant_content(self, token_ids: list[int]) -> str:
        """The text of a model turn as a message content (its trailing EOS left to the template)."""
        text = self.tokenizer.decode(token_ids, skip_special_tokens=False)
        return text[: -len(self.eos_text)] if self.eos_text and text.endswith(self.eos_text) else text

    # ------------------------------------------------------------------ sanity check

    def sanity_check(self, messages: list[dict[str, Any]], token_ids: list[int], mode: str) -> bool:
        """Whether ``token_ids`` (built turn by turn) start the tokenization of the whole chat ``messages``.

        ``strict``: ids equal; ``ignore_strippable``: decoded texts equal up to whitespace; ``disable``: True.
        """
        if mode == "disable":
            return True
        last_is_model = bool(messages) and messages[-1].get("role") == "assistant"
        whole = self.encode(self.render(self.with_tools_prompt(messages), add_generation_prompt=not last_is_model))
        if mode == "strict":
            return whole[: len(token_ids)] == list(token_ids)
        built = "".join(self.tokenizer.decode(token_ids, skip_special_tokens=False).split())
        reference = "".join(self.tokenizer.decode(whole, skip_special_tokens=False).split())
        return reference.startswith(built)


def tool_schema_json(tool_schemas: list[dict[str, Any]]) -> str:
    """One JSON object per line, as tool lists are usually shown to a model."""
    return "\n".join(json.dumps(schema, ensure_ascii=False) for schema in tool_schemas)

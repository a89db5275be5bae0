"""The judge's chat: ``reward_model.judge.prompt_template`` filled with one sample's fields.

Placeholders: ``{prompt}`` (the last user message of the chat, or the decoded prompt text without
``data.return_raw_chat``), ``{response}``, ``{ground_truth}``, ``{data_source}``; write literal braces as ``{{ }}``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

TEMPLATE_FIELDS = ("prompt", "response", "ground_truth", "data_source")


@dataclass
class JudgeSample:
    """What the template sees of one sample."""

    prompt: str
    response: str
    ground_truth: Any = None
    data_source: str = ""


def template_errors(template: str, key: str = "reward_model.judge.prompt_template") -> list[str]:
    """Problems of ``template`` (bad syntax, unknown or positional placeholders), each naming ``key``."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return [f"{key} is not a valid format string ({exc}); write literal braces as '{{{{' and '}}}}'"]
    errors = []
    for name in fields:
        base = name.split(".")[0].split("[")[0]
        if base not in TEMPLATE_FIELDS:
            errors.append(
                f"{key} uses the placeholder {{{name}}}; allowed: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)} "
                "(write literal braces as '{{' and '}}')"
            )
    if "response" not in {name.split(".")[0] for name in fields}:
        errors.append(f"{key} has no {{response}} placeholder: the judge would never see the response")
    return errors


def last_user_message(messages: Any) -> str | None:
    """Content of the last ``user`` message of a chat (None when there is none)."""
    for message in reversed(list(messages)):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content", ""))
    return None


def judge_messages(sample: JudgeSample, template: str, system_prompt: str | None) -> list[dict[str, str]]:
    """The judge's chat for ``sample``: an optional system message, then the filled template as the user turn."""
    content = template.format(
        prompt=sample.prompt,
        response=sample.response,
        ground_truth="" if sample.ground_truth is None else sample.ground_truth,
        data_source=sample.data_source,
    )
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": content}]

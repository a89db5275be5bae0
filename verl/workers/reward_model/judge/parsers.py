"""Judgment parsers: the judge's text -> a rating, or None when the text holds no rating.

Chosen by ``reward_model.judge.parser``; add one with ``@register_judgment_parser("name")`` on a
``fn(text: str) -> float | None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

JudgmentParser = Callable[[str], float | None]

JUDGMENT_PARSER_REGISTRY: dict[str, JudgmentParser] = {}

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"


def register_judgment_parser(name: str) -> Callable[[JudgmentParser], JudgmentParser]:
    """Decorator adding a parser under ``name`` (a second, different function is refused)."""

    def decorate(fn: JudgmentParser) -> JudgmentParser:
        existing = JUDGMENT_PARSER_REGISTRY.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"judgment parser {name!r} is already registered as {existing.__qualname__}")
        JUDGMENT_PARSER_REGISTRY[name] = fn
        return fn

    return decorate


def get_judgment_parser(name: str) -> JudgmentParser:
    """The parser registered as ``name``; unknown names fail listing the registered ones."""
    if name not in JUDGMENT_PARSER_REGISTRY:
        raise ValueError(
            f"Unknown judgment parser {name!r} (reward_model.judge.parser). Registered: "
            f"{sorted(JUDGMENT_PARSER_REGISTRY)}. Add one with @register_judgment_parser(name)."
        )
    return JUDGMENT_PARSER_REGISTRY[name]


@register_judgment_parser("last_number")
def parse_last_number(text: str) -> float | None:
    """The last number in the text (``"... Rating: 7/10"`` gives 10, so ask for the rating alone on the last line)."""
    numbers = re.findall(_NUMBER, text)
    return float(numbers[-1]) if numbers else None


@register_judgment_parser("score_tag")
def parse_score_tag(text: str) -> float | None:
    """The number inside the last ``<score>...</score>``."""
    tags = re.findall(rf"<score>\s*({_NUMBER})\s*</score>", text, flags=re.IGNORECASE)
    return float(tags[-1]) if tags else None


@register_judgment_parser("boxed")
def parse_boxed(text: str) -> float | None:
    """The number inside the last ``\\boxed{...}``."""
    boxes = re.findall(rf"\\boxed\{{\s*({_NUMBER})\s*\}}", text)
    return float(boxes[-1]) if boxes else None


@register_judgment_parser("yes_no")
def parse_yes_no(text: str) -> float | None:
    """1 for a judgment whose first yes/no word is "yes", 0 for "no" (case-insensitive, whole words)."""
    match = re.search(r"\b(yes|no)\b", text, flags=re.IGNORECASE)
    if match is None:
        return None
    return 1.0 if match.group(1).lower() == "yes" else 0.0

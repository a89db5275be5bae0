"""Judgment parsers: the judge's text -> a rating, or None when the text holds no rating.

Chosen by ``reward_model.judge.parser``; add one with ``@register_judgment_parser("name")`` on a
``fn(text: str) -> float | None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from verl.utils.registry import Registry

JudgmentParser = Callable[[str], float | None]

JUDGMENT_PARSER_REGISTRY: Registry[JudgmentParser] = Registry(
    "judgment parser",
    "reward_model.judge.parser",
    package="verl.workers.reward_model.judge.parsers",
    decorator="register_judgment_parser",
)

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"


def register_judgment_parser(name: str) -> Callable[[JudgmentParser], JudgmentParser]:
    """Decorator adding a parser under ``name`` (a second, different function is refused)."""
    return JUDGMENT_PARSER_REGISTRY.register(name)


def get_judgment_parser(name: str) -> JudgmentParser:
    """The parser registered as ``name``; unknown names fail listing the registered ones."""
    return JUDGMENT_PARSER_REGISTRY.get(name)


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

"""Shared number handling for the answer scorers: unicode digits, thousands separators, numeric equality."""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation

# Scorers read only the end of a response: a final answer sits there, and a regex over a 100k-character
# ramble would cost milliseconds per sample. 300 characters is what verl's GSM8K scorer keeps.
TAIL_CHARS = 300

NUMBER_PATTERN = r"-?[0-9][0-9,]*(?:\.[0-9]+)?|-?\.[0-9]+"


def to_ascii_digits(text: str) -> str:
    """Map every unicode decimal digit (fullwidth '７', Arabic-Indic '٧', ...) to its ASCII digit."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text)


def clean_number(text: str) -> str:
    """Drop thousands separators, currency signs, spaces and a trailing full stop: '$1,000.' -> '1000'."""
    return text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")


def numbers_equal(prediction: str, ground_truth: str) -> bool:
    """True when both strings are the same decimal number ('72.0' == '72', '1,000' == '1000')."""
    try:
        return Decimal(clean_number(prediction)) == Decimal(clean_number(ground_truth))
    except (InvalidOperation, ValueError):
        return clean_number(prediction) == clean_number(ground_truth)


def last_number(text: str) -> str | None:
    """The last number written in ``text`` (ASCII digits, optional sign, commas and decimals), or None."""
    matches = re.findall(NUMBER_PATTERN, text)
    return clean_number(matches[-1]) if matches else None

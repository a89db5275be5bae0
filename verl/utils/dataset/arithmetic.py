"""The built-in arithmetic task: sums and differences of whole numbers, generated deterministically.

A problem is ``a ± b`` (``a ± b ± c ...`` with more operands): ``num_operands`` terms drawn uniformly
from ``[0, max_operand]``, each sign + or - with probability 1/2. The prompt asks for the result after
``####`` and the ``arithmetic`` scorer (:mod:`verl.utils.reward_score.arithmetic`) checks it. The
defaults (2 operands up to 49) are set so that SmolLM2-135M-Instruct starts low but above zero (see
docs/data_and_rewards.md for the measured accuracy) and can improve with RL.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

DATA_SOURCE = "arithmetic"
INSTRUCTION = 'Give only the final answer after "####".'


@dataclass(frozen=True)
class ArithmeticSpec:
    """How many problems to make and how hard they are."""

    train_size: int = 8192
    test_size: int = 256
    num_operands: int = 2
    max_operand: int = 49
    seed: int = 2024


def make_problem(rng: random.Random, spec: ArithmeticSpec) -> tuple[str, int]:
    """One expression such as ``'37 + 58 - 12'`` and its value."""
    terms = [rng.randint(0, spec.max_operand) for _ in range(spec.num_operands)]
    expression, value = str(terms[0]), terms[0]
    for term in terms[1:]:
        if rng.random() < 0.5:
            expression, value = f"{expression} + {term}", value + term
        else:
            expression, value = f"{expression} - {term}", value - term
    return expression, value


def make_row(expression: str, value: int, split: str, index: int) -> dict[str, Any]:
    """A row in verl's schema for one problem; ``extra_info.answer`` is the reference response (``#### <value>``), so
    the task also serves supervised recipes (SFT, SPIN) with ``data.response_key=extra_info.answer``."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"What is {expression}? {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(value)},
        "extra_info": {"split": split, "index": index, "expression": expression, "answer": f"#### {value}"},
    }


def make_split(split: str, spec: ArithmeticSpec = ArithmeticSpec()) -> list[dict[str, Any]]:
    """All rows of ``split`` ('train' or 'test'); the test problems never appear in train."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    rng = random.Random(spec.seed)
    test_rows, seen = [], set()
    while len(test_rows) < spec.test_size:
        expression, value = make_problem(rng, spec)
        if expression not in seen:
            seen.add(expression)
            test_rows.append(make_row(expression, value, "test", len(test_rows)))
    if split == "test":
        return test_rows
    train_rows = []
    while len(train_rows) < spec.train_size:
        expression, value = make_problem(rng, spec)
        if expression not in seen:
            train_rows.append(make_row(expression, value, "train", len(train_rows)))
    return train_rows

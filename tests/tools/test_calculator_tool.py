"""CalculatorTool: expressions evaluated against hand-worked values; anything else is an error message."""

from __future__ import annotations

import asyncio

import pytest

from verl.tools.calculator_tool import CalculatorError, CalculatorTool, evaluate_expression


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("37 + 58 - 12", "83"),
        ("2 * (3 + 4)", "14"),
        ("7 / 2", "3.5"),
        ("8 / 4", "2"),  # an integral float is shown without ".0"
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("2 ^ 10", "1024"),  # ^ is read as a power, as people write it
        ("3 × 4 ÷ 6", "2"),
        ("-(5 - 8)", "3"),
        ("1 / 3", "0.3333333333"),
    ],
)
def test_evaluates_arithmetic(expression, expected):
    assert evaluate_expression(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('ls')", "unsupported syntax"),
        ("x + 1", "unsupported syntax"),
        ("1 / 0", "division by zero"),
        ("2 ** 1000", "exponent"),
        ("9 ** 99 * 9 ** 99", "digits"),
        ("(1 + 2", "cannot parse"),
        ("1 +" * 100, "longer than"),
        ("'a' * 3", "unsupported syntax"),
    ],
)
def test_rejects_what_is_not_bounded_arithmetic(expression, message):
    with pytest.raises(CalculatorError, match=message):
        evaluate_expression(expression)


def test_execute_returns_the_value_or_an_error_message():
    tool = CalculatorTool({"type": "native"})
    assert tool.name == "calculator"

    async def run(parameters):
        instance_id, _ = await tool.create()
        response, reward, metrics = await tool.execute(instance_id, parameters)
        await tool.release(instance_id)
        return response.text, reward, metrics

    assert asyncio.run(run({"expression": "12 + 7"})) == ("19", 0.0, {})
    assert asyncio.run(run('{"expression": "3 * 3"}')) == ("9", 0.0, {})  # verl's older callers pass JSON text
    text, _, metrics = asyncio.run(run({"expression": "1 / 0"}))
    assert text == "Error: division by zero" and metrics == {"error": 1.0}
    text, _, _ = asyncio.run(run({"expr": "1"}))
    assert text.startswith("Error: the call needs")

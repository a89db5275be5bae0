"""``CalculatorTool``: evaluates an arithmetic expression for the model (``calculator``, parameter ``expression``).

The expression is parsed with :mod:`ast` and only numbers, parentheses and ``+ - * / // % **`` are evaluated
(never ``eval``); exponents are capped at :data:`MAX_EXPONENT` and results at :data:`MAX_DIGITS` digits so a call
cannot stall the rollout. A bad expression returns an error message to the model.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.gsm8k_tool import parse_parameters
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

MAX_EXPONENT = 100
MAX_DIGITS = 64
MAX_EXPRESSION_CHARS = 200

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}

DEFAULT_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "The expression, e.g. 37 + 58 - 12"}},
            "required": ["expression"],
        },
    },
}


class CalculatorError(ValueError):
    """An expression the calculator does not evaluate; the message is shown to the model."""


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right} is larger than {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if isinstance(value, int) and len(str(abs(value))) > MAX_DIGITS:
            raise CalculatorError(f"the result has more than {MAX_DIGITS} digits")
        return value
    raise CalculatorError(f"unsupported syntax: {ast.unparse(node)}")


def evaluate_expression(expression: str) -> str:
    """The value of ``expression`` as text (integers without a decimal point, floats to 10 significant digits)."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/"), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"cannot parse {expression!r}") from None
    value = _evaluate(tree)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.10g}"
    return str(value)


class CalculatorTool(BaseTool):
    """Stateless arithmetic; the schema defaults to :data:`DEFAULT_SCHEMA` when the YAML gives none."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        super().__init__(config, tool_schema or OpenAIFunctionToolSchema.model_validate(DEFAULT_SCHEMA))

    async def execute(self, instance_id: str, parameters: Any, **kwargs) -> tuple[ToolResponse, float, dict]:
        expression = parse_parameters(parameters).get("expression")
        if not isinstance(expression, str | int | float):
            return ToolResponse(text="Error: the call needs a string argument 'expression'"), 0.0, {"error": 1.0}
        try:
            return ToolResponse(text=evaluate_expression(str(expression))), 0.0, {}
        except (CalculatorError, RecursionError, OverflowError) as exc:
            return ToolResponse(text=f"Error: {exc}"), 0.0, {"error": 1.0}

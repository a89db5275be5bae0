"""Arithmetic with a calculator tool: the built-in task's problems, harder, with one worked tool call in the chat.

    python recipe/calculator_agent/prepare_data.py --local_save_dir ~/data/arithmetic_calculator

Problems are ``a ± b`` with operands up to ``--max_operand`` (999 by default: hard to do in the head for a 135M
model, trivial with the tool). The prompt holds one demonstration exchange (a question, the calculator call, its
result, the answer) before the question, so a small model starts out calling the tool some of the time; RL then
has something to reinforce. Rows use the ``arithmetic`` scorer (answer after ``####``) and ``agent_name:
tool_agent``.
"""

from __future__ import annotations

import argparse
import json
import os
import random

from verl.utils.dataset.arithmetic import DATA_SOURCE, INSTRUCTION, ArithmeticSpec, make_problem

DEMO_QUESTION = "What is 512 - 87?"
DEMO_CALL = {"name": "calculator", "arguments": {"expression": "512 - 87"}}
DEMO_RESULT = "425"


def demonstration() -> list[dict[str, str]]:
    """One worked exchange: the user asks, the model calls the calculator, reads the result and answers."""
    return [
        {"role": "user", "content": f"{DEMO_QUESTION} {INSTRUCTION}"},
        {"role": "assistant", "content": f"<tool_call>\n{json.dumps(DEMO_CALL)}\n</tool_call>"},
        {"role": "tool", "content": DEMO_RESULT},
        {"role": "assistant", "content": f"#### {DEMO_RESULT}"},
    ]


def make_rows(split: str, size: int, spec: ArithmeticSpec, seed: int, exclude: set[str]) -> list[dict]:
    """``size`` distinct problems not in ``exclude`` (which grows with them), as tool-agent rows."""
    rng = random.Random(seed)
    rows = []
    while len(rows) < size:
        expression, value = make_problem(rng, spec)
        if expression in exclude:
            continue
        exclude.add(expression)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "agent_name": "tool_agent",
                "prompt": [*demonstration(), {"role": "user", "content": f"What is {expression}? {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(value)},
                "extra_info": {"split": split, "index": len(rows), "expression": expression},
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_save_dir", default="~/data/arithmetic_calculator", help="output folder")
    parser.add_argument("--train_size", type=int, default=2048)
    parser.add_argument("--test_size", type=int, default=64)
    parser.add_argument("--max_operand", type=int, default=999)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from verl.utils.dataset.row_reading import write_parquet

    spec = ArithmeticSpec(num_operands=2, max_operand=args.max_operand)
    seen: set[str] = {DEMO_QUESTION.removeprefix("What is ").rstrip("?")}
    save_dir = os.path.expanduser(args.local_save_dir)
    for split, size, seed in (("test", args.test_size, args.seed), ("train", args.train_size, args.seed + 1)):
        rows = make_rows(split, size, spec, seed, seen)
        write_parquet(rows, os.path.join(save_dir, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} rows to {os.path.join(save_dir, split + '.parquet')}")


if __name__ == "__main__":
    main()

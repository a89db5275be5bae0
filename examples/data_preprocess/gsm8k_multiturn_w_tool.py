"""Write GSM8K for multi-turn tool use (verl's ``gsm8k_multiturn_w_tool`` schema) as train/test parquet.

    python examples/data_preprocess/gsm8k_multiturn_w_tool.py --local_dataset_path ../shared/data/gsm8k \
        --local_save_dir ~/data/gsm8k_multiturn_w_tool

Each row asks for step-by-step reasoning, then the ``calc_gsm8k_reward`` tool, then ``#### <answer>``; its
``extra_info.tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth`` feeds the tool and
``extra_info.interaction_kwargs`` the gsm8k interaction; ``agent_name`` is ``tool_agent``. Sources as in
``gsm8k.py``: local ``train.jsonl`` / ``test.jsonl`` or the Hugging Face hub.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gsm8k  # noqa: E402
from gsm8k import DATA_SOURCE, INSTRUCTION, extract_solution  # noqa: E402

TOOL_NAME = "calc_gsm8k_reward"
SYSTEM_PROMPT = (
    "You are a math expert. You are given a question and you need to solve it step by step. "
    "Reason step by step before any tool call. "
    f"You should use the `{TOOL_NAME}` tool after solving the question, before giving the final answer, "
    "at least once, and refine your answer if necessary. Put your final answer in the format of `#### <answer>`."
)


def make_row(example: dict, split: str, index: int) -> dict:
    """One GSM8K example as a multi-turn tool row."""
    question = example["question"]
    solution = extract_solution(example["answer"])
    return {
        "data_source": DATA_SOURCE,
        "agent_name": "tool_agent",
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{question} {INSTRUCTION}"},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": solution},
        "extra_info": {
            "split": split,
            "index": index,
            "answer": example["answer"],
            "question": question,
            "need_tools_kwargs": True,
            "tools_kwargs": {TOOL_NAME: {"create_kwargs": {"ground_truth": solution}}},
            "interaction_kwargs": {"name": "gsm8k", "query": question, "ground_truth": solution},
        },
    }


if __name__ == "__main__":
    gsm8k.main(row_fn=make_row, save_dir="~/data/gsm8k_multiturn_w_tool", doc=__doc__)

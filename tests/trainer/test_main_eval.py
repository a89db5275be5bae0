"""``main_eval`` on hand-made generations: mean@n and pass@k per data source against a recount.

The recount uses the correctness label written next to each hand-made response and computes pass@k by
enumerating every k-subset of a prompt's responses (no closed formula).
"""

from __future__ import annotations

import json
from itertools import combinations

import pandas as pd
import pytest

from verl.trainer.config.loader import CONFIG_DIR, _compose
from verl.trainer.main_eval import pass_at_k, run_eval

# (ground truth, [(response, is_correct), ...]) per prompt; 4 responses each
GSM8K_PROMPTS = [
    ("18", [("... so #### 18", True), ("#### 18", True), ("She makes $18. #### 18", True), ("#### 18.", True)]),
    ("3", [("#### 4", False), ("2 + 1 = 3 #### 3", True), ("the answer is 3", False), ("#### 6", False)]),
    ("70000", [("#### 70,000", True), ("#### 7000", False), ("#### 70000", True), ("no idea", False)]),
    ("540", [("#### 54", False), ("#### 5400", False), ("####", False), ("540?", False)]),
]


def enumerate_pass_at_k(labels: list[bool], k: int) -> float:
    subsets = list(combinations(labels, k))
    return sum(any(subset) for subset in subsets) / len(subsets)


def recount(prompts) -> dict[str, float]:
    labels = [[ok for _, ok in responses] for _, responses in prompts]
    report = {"num_prompts": len(labels), "n": 4, "mean@4": sum(sum(ls) / 4 for ls in labels) / len(labels)}
    for k in (1, 2, 4):
        report[f"pass@{k}"] = sum(enumerate_pass_at_k(ls, k) for ls in labels) / len(labels)
    return report


def _config(overrides):
    return _compose(str(CONFIG_DIR), "evaluation", overrides)


def test_default_scorer_report_matches_recount(tmp_path):
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"question {i}"}],
            "reward_model": {"style": "rule", "ground_truth": truth},
            "responses": [text for text, _ in responses],
        }
        for i, (truth, responses) in enumerate(GSM8K_PROMPTS)
    ]
    path = tmp_path / "gen.parquet"
    pd.DataFrame(rows).to_parquet(path)
    report = run_eval(_config([f"data.path={path}"]))
    expected = recount(GSM8K_PROMPTS)
    assert set(report) == {"openai/gsm8k"}
    assert report["openai/gsm8k"] == pytest.approx(expected)
    assert json.loads((tmp_path / "gen_eval.json").read_text()) == report


def test_custom_reward_function_and_several_data_sources(tmp_path):
    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text(
        "def exact(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):\n"
        "    return {'score': (1.0 if solution_str.strip() == ground_truth else -1.0) + bonus, 'extra': 1}\n"
    )
    rows = [
        {"src": "a", "rm": {"ground_truth": "x"}, "out": ["x", "y"]},
        {"src": "a", "rm": {"ground_truth": "y"}, "out": ["z", "z"]},
        {"src": "b", "rm": {"ground_truth": "q"}, "out": [" q ", "q"]},
    ]
    path = tmp_path / "gen.parquet"
    pd.DataFrame(rows).to_parquet(path)
    report = run_eval(
        _config(
            [
                f"data.path={path}",
                "data.response_key=out",
                "data.data_source_key=src",
                "data.reward_model_key=rm",
                f"custom_reward_function.path={reward_file}",
                "custom_reward_function.name=exact",
                "+custom_reward_function.reward_kwargs.bonus=0.5",
                f"output_path={tmp_path / 'report.json'}",
            ]
        )
    )
    # scores +0.5 bonus: a: [1.5, -0.5], [-0.5, -0.5]; b: [1.5, 1.5]; correct when > 0
    assert report["a"] == pytest.approx({"num_prompts": 2, "n": 2, "mean@2": 0.0, "pass@1": 0.25, "pass@2": 0.5})
    assert report["b"] == pytest.approx({"num_prompts": 1, "n": 2, "mean@2": 1.5, "pass@1": 1.0, "pass@2": 1.0})
    assert (tmp_path / "report.json").exists()


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (5, 4, 2), (6, 6, 6), (7, 3, 4)])
def test_pass_at_k_matches_subset_enumeration(n, c, k):
    labels = [True] * c + [False] * (n - c)
    assert pass_at_k(n, c, k) == pytest.approx(enumerate_pass_at_k(labels, k))


def test_missing_column_names_it(tmp_path):
    path = tmp_path / "gen.parquet"
    pd.DataFrame([{"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "1"}}]).to_parquet(path)
    with pytest.raises(KeyError, match="responses"):
        run_eval(_config([f"data.path={path}"]))

"""CombinedReward built from the config: weighted rule + model scores per data source, hand-computed; the rule
scorer never sees rows whose data source does not use it; per-source statistics in ``reward_metrics``."""

from __future__ import annotations

import pytest
import torch

from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.workers.config.reward_model import RewardCombineConfig, RewardModelConfig
from verl.workers.reward_manager import NaiveRewardManager
from verl.workers.reward_manager.combined import CombinedReward
from verl.workers.reward_manager.from_config import build_reward_fn

RESPONSES = ["The answer is 4", "Hello", "#### 7", "Sure, here it is"]
SOURCES = ["math", "chat", "math", "chat"]
RM = [0.8, -1.5, 2.0, 0.25]


def length_score(data_source, solution_str, ground_truth, extra_info=None):
    if data_source != "math":
        raise AssertionError(f"the rule scorer was called on a {data_source!r} row")
    return {"score": float(len(solution_str)), "acc": float(solution_str == ground_truth)}


def _batch(tokenizer):
    data, lengths = make_batch(tokenizer, RESPONSES, ["4", None, "#### 7", None], data_source=SOURCES)
    data.batch["rm_scores"] = expected_tensor(RM, lengths)
    return data, lengths


def test_weighted_sum_per_data_source(tokenizer):
    data, lengths = _batch(tokenizer)
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=length_score)
    config = RewardModelConfig(
        enable=True,
        micro_batch_size_per_gpu=1,
        combine=RewardCombineConfig(weights={"rule": 1.0, "model": 0.5}, data_sources={"chat": ["model"]}),
    )
    reward_fn = build_reward_fn(config, manager, tokenizer)
    assert isinstance(reward_fn, CombinedReward)
    result = reward_fn(data, return_dict=True)

    rule = [float(len(r)) if s == "math" else 0.0 for r, s in zip(RESPONSES, SOURCES)]
    expected = [r + 0.5 * m for r, m in zip(rule, RM)]
    torch.testing.assert_close(result["reward_tensor"], expected_tensor(expected, lengths))
    metrics = result["reward_metrics"]
    assert metrics["reward/rule/mean"] == pytest.approx((15 + 6) / 2)
    assert metrics["reward/rule/min"] == 6 and metrics["reward/rule/max"] == 15
    assert metrics["reward/model/mean"] == pytest.approx(sum(RM) / 4)
    assert metrics["reward/model/min"] == -1.5 and metrics["reward/model/max"] == 2.0
    extra = result["reward_extra_info"]
    assert extra["model_score"] == pytest.approx(RM)  # the model scored every row: its extras are kept
    assert "rule_score" not in extra and "acc" not in extra  # the rule scored half of them: not per row


def test_default_is_the_model_alone_and_plain_manager_without_a_model(tokenizer):
    data, lengths = _batch(tokenizer)
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=length_score)
    model_only = build_reward_fn(RewardModelConfig(enable=True, micro_batch_size_per_gpu=1), manager, tokenizer)
    torch.testing.assert_close(model_only(data), expected_tensor(RM, lengths))
    assert build_reward_fn(RewardModelConfig(), manager, tokenizer) is manager


def test_rule_only_data_source_selection_without_a_model(tokenizer):
    data, lengths = _batch(tokenizer)
    data.non_tensor_batch["data_source"][:] = "math"
    data.batch.pop("rm_scores")
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=length_score)
    config = RewardModelConfig(combine=RewardCombineConfig(weights={"rule": 2.0}))
    result = build_reward_fn(config, manager, tokenizer)(data, return_dict=True)
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([2.0 * len(r) for r in RESPONSES], lengths))
    assert result["reward_extra_info"]["acc"] == [0.0, 0.0, 1.0, 0.0]


def test_a_data_source_naming_a_source_that_does_not_run_fails(tokenizer):
    data, _ = _batch(tokenizer)
    reward_fn = CombinedReward({"model": object()}, {"model": 1.0}, lambda source: ["judge"])
    with pytest.raises(ValueError, match="'math' is scored by \\['judge'\\].*running sources: \\['model'\\]"):
        reward_fn(data)

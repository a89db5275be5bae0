"""Naive, batch and DAPO managers against hand-computed scores and placements."""

import os

import pytest
import torch

from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.workers.reward_manager import BatchRewardManager, DAPORewardManager, NaiveRewardManager

RESPONSES = ["48 + 24 = 72\n#### 72", "I think it is 5", "#### 1,000", ""]
TRUTHS = ["72", "5", "1000", "3"]
STRICT_SCORES = [1.0, 0.0, 1.0, 0.0]  # strict GSM8K: '#### n' required


def test_naive_scores_at_last_valid_token(tokenizer):
    data, lengths = make_batch(tokenizer, RESPONSES, TRUTHS)
    assert lengths[3] == 0  # an empty response gets no score position
    reward = NaiveRewardManager(tokenizer, num_examine=1)(data)
    torch.testing.assert_close(reward, expected_tensor(STRICT_SCORES, lengths))


def test_naive_dict_scores_fill_extra_info(tokenizer):
    data, lengths = make_batch(tokenizer, ["#### 7", "7 it is", "#### 8"], ["7", "7", "7"], data_source="arithmetic")
    result = NaiveRewardManager(tokenizer, num_examine=0)(data, return_dict=True)
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.0, 1.0, 0.0], lengths))
    assert result["reward_extra_info"]["acc"] == [1.0, 1.0, 0.0]
    assert result["reward_extra_info"]["format"] == [1.0, 0.0, 1.0]


def _report_keywords(data_source, solution_str, ground_truth, extra_info):
    """Scores run in the scoring processes: the arguments come back in the result's extra keys."""
    return {"score": len(solution_str), "seen": (data_source, solution_str, ground_truth, extra_info["index"])}


def test_naive_custom_score_gets_keywords(tokenizer):
    data, lengths = make_batch(tokenizer, ["ab", "abcd"], ["x", "y"], data_source="mine")
    result = NaiveRewardManager(tokenizer, 0, compute_score=_report_keywords)(data, return_dict=True)
    assert result["reward_extra_info"]["seen"] == [("mine", "ab", "x", 0), ("mine", "abcd", "y", 1)]
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([2.0, 4.0], lengths))
    assert result["reward_metrics"] == {"reward/timeouts": 0.0, "reward/errors": 0.0}


def test_rm_scores_pass_through(tokenizer):
    data, _ = make_batch(tokenizer, ["a"], ["1"])
    data.batch["rm_scores"] = torch.full((1, 24), 0.25)
    torch.testing.assert_close(NaiveRewardManager(tokenizer, 0)(data), torch.full((1, 24), 0.25))


def test_batch_manager_calls_once(tokenizer):
    def score_all(data_sources, solution_strs, ground_truths, extra_infos, bonus):
        # the pid of the process that ran the call: one call scores the whole batch
        return [
            {"score": float(s.endswith(g)) + bonus, "length": len(s), "pid": os.getpid()}
            for s, g in zip(solution_strs, ground_truths)
        ]

    data, lengths = make_batch(tokenizer, ["#### 72", "#### 3", "ok 9"], ["72", "4", "9"])
    manager = BatchRewardManager(tokenizer, 0, compute_score=score_all, bonus=0.5, scoring={"num_processes": 2})
    result = manager(data, return_dict=True)
    assert len(set(result["reward_extra_info"]["pid"])) == 1
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.5, 0.5, 1.5], lengths))
    assert result["reward_extra_info"]["length"] == [7, 6, 4]


def test_batch_manager_without_function_uses_default_scores(tokenizer):
    data, lengths = make_batch(tokenizer, RESPONSES, TRUTHS)
    reward = BatchRewardManager(tokenizer, 0)(data)
    torch.testing.assert_close(reward, expected_tensor(STRICT_SCORES, lengths))


def test_dapo_overlong_penalty(tokenizer):
    """max_resp_len L=24, buffer 8: the penalty starts above 16 tokens, -(l - 16) / 8 * 0.5."""
    responses = ["#### 72", "#### 72 " + "word " * 30, "#### 72 " + "a " * 14]
    data, lengths = make_batch(tokenizer, responses, ["72"] * 3)
    assert lengths[0] <= 16 and lengths[1] == 24 and 16 < lengths[2] < 24
    cfg = {"enable": True, "len": 8, "penalty_factor": 0.5, "log": True}
    manager = DAPORewardManager(tokenizer, 0, max_resp_len=24, overlong_buffer_cfg=cfg)
    result = manager(data, return_dict=True)
    penalties = [min(-(length - 16) / 8 * 0.5, 0.0) for length in lengths]
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.0 + p for p in penalties], lengths))
    assert result["reward_extra_info"]["overlong_reward"] == pytest.approx(penalties)
    assert result["reward_extra_info"]["overlong"] == [p < 0 for p in penalties]


def test_dapo_without_buffer_is_naive(tokenizer):
    data, lengths = make_batch(tokenizer, RESPONSES, TRUTHS)
    torch.testing.assert_close(DAPORewardManager(tokenizer, 0)(data), expected_tensor(STRICT_SCORES, lengths))


def test_dapo_needs_max_resp_len(tokenizer):
    with pytest.raises(ValueError, match="max_resp_len"):
        DAPORewardManager(tokenizer, 0, overlong_buffer_cfg={"enable": True, "len": 4})

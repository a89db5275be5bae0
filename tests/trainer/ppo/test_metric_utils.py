"""metric_utils against hand-worked numbers (and float64 numpy for the variances)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.metric_utils import (
    calc_maj_val,
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
    process_validation_metrics,
    reward_trend_summary,
    validation_metrics_to_log,
)


def _batch() -> DataProto:
    """Two samples, prompt width 3 (lengths 2 and 3), response width 4 (lengths 2 and 4)."""
    prompt_mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    response_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    tensors = {
        "responses": torch.zeros(2, 4, dtype=torch.long),
        "attention_mask": torch.cat([prompt_mask, response_mask], dim=1),
        "response_mask": response_mask,
        "token_level_scores": torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.5]]),
        "token_level_rewards": torch.tensor([[0.0, 0.9, 0.0, 0.0], [0.0, 0.0, 0.0, 0.2]]),
        "advantages": torch.tensor([[1.0, 2.0, 9.0, 9.0], [3.0, 4.0, 5.0, 6.0]]),
        "returns": torch.tensor([[1.0, 1.0, 9.0, 9.0], [2.0, 2.0, 2.0, 2.0]]),
        "values": torch.tensor([[0.0, 1.0, 9.0, 9.0], [2.0, 2.0, 1.0, 3.0]]),
    }
    return DataProto.from_dict(tensors=tensors)


def test_compute_data_metrics_hand_worked():
    metrics = compute_data_metrics(_batch(), use_critic=True)
    assert metrics["critic/score/mean"] == pytest.approx(0.75)
    assert metrics["critic/score/max"] == pytest.approx(1.0)
    assert metrics["critic/score/min"] == pytest.approx(0.5)
    assert metrics["critic/rewards/mean"] == pytest.approx(0.55)
    # valid advantage tokens: 1, 2 | 3, 4, 5, 6 (the 9s are padding)
    assert metrics["critic/advantages/mean"] == pytest.approx(3.5)
    assert metrics["critic/advantages/max"] == pytest.approx(6.0)
    assert metrics["critic/advantages/min"] == pytest.approx(1.0)
    assert metrics["critic/returns/mean"] == pytest.approx(10 / 6)
    assert metrics["critic/values/mean"] == pytest.approx(9 / 6)
    returns = np.array([1, 1, 2, 2, 2, 2], dtype=np.float64)
    values = np.array([0, 1, 2, 2, 1, 3], dtype=np.float64)
    expected_ev = 1 - np.var(returns - values, ddof=1) / (np.var(returns, ddof=1) + 1e-5)
    assert metrics["critic/vf_explained_var"] == pytest.approx(expected_ev, rel=1e-5)
    assert metrics["response_length/mean"] == pytest.approx(3.0)
    assert metrics["response_length/max"] == 4 and metrics["response_length/min"] == 2
    assert metrics["response_length/clip_ratio"] == pytest.approx(0.5)
    assert metrics["prompt_length/mean"] == pytest.approx(2.5)
    assert metrics["prompt_length/clip_ratio"] == pytest.approx(0.5)


def test_compute_data_metrics_without_critic_has_no_value_keys():
    metrics = compute_data_metrics(_batch(), use_critic=False)
    assert not any(key.startswith("critic/values") for key in metrics)
    assert "critic/vf_explained_var" not in metrics


def test_timing_and_throughput():
    batch = _batch()
    batch.meta_info["global_token_num"] = [4, 7]
    timing = {"gen": 2.0, "update_actor": 3.0, "step": 5.5}
    metrics = compute_timing_metrics(batch, timing)
    assert metrics["timing_s/gen"] == 2.0 and metrics["timing_s/step"] == 5.5
    # 6 response tokens; 5 prompt + 6 response tokens overall
    assert metrics["timing_per_token_ms/gen"] == pytest.approx(2000 / 6)
    assert metrics["timing_per_token_ms/update_actor"] == pytest.approx(3000 / 11)
    assert "timing_per_token_ms/step" not in metrics
    perf = compute_throughout_metrics(batch, timing, n_gpus=2)
    assert perf == {"perf/total_num_tokens": 11.0, "perf/time_per_step": 5.5, "perf/throughput": 1.0}


def test_calc_maj_val_picks_most_voted_answer():
    data = [{"pred": "7", "val": 1.0}, {"pred": "3", "val": 0.0}, {"pred": "3", "val": 0.0}]
    assert calc_maj_val(data, vote_key="pred", val_key="val") == 0.0


def test_validation_single_response_is_mean_over_prompts():
    result = process_validation_metrics(
        ["ds", "ds", "ds", "other"], ["p1", "p2", "p3", "q"], {"reward": [1.0, 0.0, 1.0, 0.5]}
    )
    assert result["ds"]["reward"] == {"mean@1": pytest.approx(2 / 3)}
    assert result["other"]["reward"] == {"mean@1": 0.5}
    logged = validation_metrics_to_log(result)
    assert logged == {"val-core/ds/reward/mean@1": pytest.approx(2 / 3), "val-core/other/reward/mean@1": 0.5}


def test_validation_best_worst_maj_with_bootstrap():
    # one prompt, 4 responses: rewards 1, 0, 0, 0; answers '5', '4', '4', '3'
    result = process_validation_metrics(
        ["ds"] * 4, ["p"] * 4, {"reward": [1.0, 0.0, 0.0, 0.0], "pred": ["5", "4", "4", "3"]}
    )
    metrics = result["ds"]["reward"]
    assert metrics["mean@4"] == pytest.approx(0.25)
    assert metrics["std@4"] == pytest.approx(np.std([1, 0, 0, 0]))
    # P(best of k draws with replacement contains the single 1) = 1 - (3/4)^k; bootstrap of 1000 draws.
    assert metrics["best@2/mean"] == pytest.approx(1 - 0.75**2, abs=0.05)
    assert metrics["best@4/mean"] == pytest.approx(1 - 0.75**4, abs=0.05)
    assert metrics["worst@4/mean"] == pytest.approx(0.0, abs=0.01)
    # majority vote is '4' (reward 0) unless the draw's majority is '5' -> well below the mean
    assert metrics["maj@4/mean"] < metrics["mean@4"]
    logged = validation_metrics_to_log(result)
    assert {
        "val-core/ds/reward/mean@4",
        "val-core/ds/reward/best@4/mean",
        "val-core/ds/reward/maj@4/mean",
    } <= logged.keys()
    assert "val-aux/ds/reward/best@2/mean" in logged and "val-aux/ds/reward/std@4" in logged
    # verl's split: every mean/maj/best metric at the largest N is core, worst@N is aux
    assert "val-core/ds/reward/best@4/std" in logged and "val-aux/ds/reward/worst@4/mean" in logged


def test_validation_reward_and_acc_are_core_other_variables_aux():
    result = process_validation_metrics(
        ["ds", "ds"], ["a", "b"], {"reward": [0.5, 0.5], "acc": [1.0, 0.0], "format": [1.0, 1.0]}
    )
    logged = validation_metrics_to_log(result)
    assert logged == {
        "val-core/ds/reward/mean@1": pytest.approx(0.5),
        "val-core/ds/acc/mean@1": pytest.approx(0.5),
        "val-aux/ds/format/mean@1": pytest.approx(1.0),
    }


def test_reward_trend_summary_quarters():
    line = reward_trend_summary([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert "first quarter (steps 1-2) 0.1500" in line
    assert "last quarter (steps 7-8) 0.7500" in line
    assert "+0.6000" in line

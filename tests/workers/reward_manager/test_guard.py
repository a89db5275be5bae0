"""GuardedSource: a call that raises or outlives its timeout either stops with an error naming the source, the
data sources, the cause and the keys, or (``fallback``) scores every row of the call with the fallback score and
counts them; a call that succeeds reports zero counters. The sources are real: a judge (HF engine on a tiny
model) too slow for its timeout, and the model-score source on a batch the reward model never scored."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.workers.config.reward_model import GenerativeJudgeConfig
from verl.workers.config.rollout import RolloutConfig
from verl.workers.reward_manager.guard import CallPolicy, GuardedSource, RewardSourceError
from verl.workers.reward_manager.sources import JudgeSource, ModelScoreSource

KEYS = "reward_model.judge.timeout / reward_model.judge.on_error"


@pytest.fixture(scope="module")
def judge_source(tokenizer):
    from verl.workers.reward_model.judge.judge import GenerativeJudge
    from verl.workers.reward_model.judge.server import JudgeServer

    rollout = RolloutConfig(name="hf", dtype="float32", prompt_length=512, response_length=24, do_sample=False)
    judge = GenerativeJudge(GenerativeJudgeConfig(), JudgeServer(tiny_model_path("llama"), rollout))
    return JudgeSource(judge, tokenizer)


def _batch(tokenizer):
    return make_batch(tokenizer, ["4", "five", "6"], ["4", "5", "6"], data_source=["math", "math", "chat"])


def test_judge_timeout_falls_back_and_counts(judge_source, tokenizer):
    data, lengths = _batch(tokenizer)
    guarded = GuardedSource(judge_source, CallPolicy(timeout=0.001, on_error="fallback", fallback_score=-0.5))
    result = guarded.score(data)
    torch.testing.assert_close(result.token_scores, expected_tensor([-0.5] * 3, lengths))
    assert result.metrics == {"reward/judge/timeouts": 3.0, "reward/judge/errors": 0.0}


def test_judge_timeout_raises_naming_source_and_keys(judge_source, tokenizer):
    data, _ = _batch(tokenizer)
    guarded = GuardedSource(judge_source, CallPolicy(timeout=0.001, on_error="raise", keys=KEYS))
    with pytest.raises(RewardSourceError) as error:
        guarded.score(data)
    message = str(error.value)
    assert "'judge' failed on 3 rows" in message and "math x2, chat x1" in message
    assert "no result after 0.001s" in message and KEYS in message


def test_judge_within_its_timeout_reports_zero_counters(judge_source, tokenizer):
    data, _ = _batch(tokenizer)
    result = GuardedSource(judge_source, CallPolicy(timeout=300, on_error="raise")).score(data)
    assert result.metrics["reward/judge/timeouts"] == 0 and result.metrics["reward/judge/errors"] == 0
    assert "reward/judge/parse_failures" in result.metrics
    assert result.token_scores.shape == data.batch["responses"].shape


def test_raising_source_falls_back_or_raises_with_its_traceback(tokenizer):
    data, lengths = _batch(tokenizer)  # no rm_scores: the model source raises KeyError
    fallback = GuardedSource(ModelScoreSource(), CallPolicy(timeout=10, on_error="fallback", fallback_score=1.0))
    result = fallback.score(data)
    torch.testing.assert_close(result.token_scores, expected_tensor([1.0] * 3, lengths))
    assert result.metrics == {"reward/model/timeouts": 0.0, "reward/model/errors": 3.0}
    with pytest.raises(RewardSourceError, match="(?s)'model' failed on 3 rows.*KeyError.*has no 'rm_scores'"):
        GuardedSource(ModelScoreSource(), CallPolicy(timeout=None)).score(data)


def test_bad_policy_is_refused():
    with pytest.raises(ValueError, match="on_error"):
        CallPolicy(on_error="ignore")

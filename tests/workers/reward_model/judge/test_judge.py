"""GenerativeJudge: hand-worked parsing, normalisation and failure counting of judgments, and a real judge call
(HF engine on a tiny model) whose scores follow from its judgments."""

from __future__ import annotations

import re

import pytest

from tests.support.models import tiny_model_path
from verl.workers.config.reward_model import GenerativeJudgeConfig
from verl.workers.config.rollout import RolloutConfig
from verl.workers.reward_model.judge.judge import GenerativeJudge
from verl.workers.reward_model.judge.prompts import JudgeSample


def test_judgments_to_scores_by_hand():
    config = GenerativeJudgeConfig(min_score=0, max_score=10, default_score=-1.0)
    judge = GenerativeJudge(config, client=None)
    result = judge.scores_from_judgments(["Good.\n8", "11", "no rating", None, "0", "2.5"])
    assert result.scores == [0.8, -1.0, -1.0, -1.0, 0.0, 0.25]
    assert result.parse_failed == [False, True, True, False, False, False]
    assert result.overlong == [False, False, False, True, False, False]
    assert result.metrics() == {"reward/judge/parse_failures": 2.0, "reward/judge/overlong": 1.0}

    raw = GenerativeJudge(GenerativeJudgeConfig(parser="score_tag", min_score=1, max_score=5, normalize=False), None)
    assert raw.scores_from_judgments(["<score>4</score>", "<score>0</score>"]).scores == [4.0, 0.0]
    yes_no = GenerativeJudge(GenerativeJudgeConfig(parser="yes_no", min_score=0, max_score=1), None)
    assert yes_no.scores_from_judgments(["Yes", "No", "maybe"]).scores == [1.0, 0.0, 0.0]


def test_bad_score_range_is_refused():
    with pytest.raises(ValueError, match="max_score"):
        GenerativeJudge(GenerativeJudgeConfig(min_score=5, max_score=5), None)


def test_real_judge_call_scores_follow_from_its_judgments():
    from verl.workers.reward_model.judge.server import JudgeServer

    rollout = RolloutConfig(name="hf", dtype="float32", prompt_length=256, response_length=6, do_sample=False)
    server = JudgeServer(tiny_model_path("llama"), rollout)
    judge = GenerativeJudge(GenerativeJudgeConfig(default_score=0.5), server)
    samples = [JudgeSample(prompt="What is 2+2?", response=str(n)) for n in range(4)]
    result = judge.score(samples)
    assert len(result.judgments) == 4 and all(isinstance(text, str) for text in result.judgments)
    for text, score, failed in zip(result.judgments, result.scores, result.parse_failed):
        numbers = [float(x) for x in re.findall(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)", text)]
        rating = numbers[-1] if numbers else None
        assert failed == (rating is None or not 0 <= rating <= 10)
        assert score == (0.5 if failed else rating / 10)

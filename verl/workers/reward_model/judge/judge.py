"""The generative judge: samples -> judge chats -> judgments (any engine) -> parsed, normalised scores.

A judgment the parser cannot read, or a rating outside ``[min_score, max_score]``, scores
``judge.default_score`` and counts in ``reward/judge/parse_failures``; a judge prompt longer than
``rollout.prompt_length`` is not sent, scores ``default_score`` and counts in ``reward/judge/overlong``.
Neither ever stops the run. Timeouts and engine errors are the call policy's business
(:mod:`verl.workers.reward_manager.guard`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from verl.workers.reward_model.judge.parsers import get_judgment_parser
from verl.workers.reward_model.judge.prompts import JudgeSample, judge_messages


class JudgeClient(Protocol):
    """Where judgments come from: one text per chat, or None for a chat too long for the engine."""

    def judge(self, chats: list[list[dict[str, str]]]) -> list[str | None]: ...


@dataclass
class JudgeResult:
    """Per-sample scores and failure flags of one judge call."""

    scores: list[float]
    parse_failed: list[bool]
    overlong: list[bool]
    judgments: list[str | None] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """``reward/judge/parse_failures`` and ``reward/judge/overlong`` (sample counts of this call)."""
        return {
            "reward/judge/parse_failures": float(sum(self.parse_failed)),
            "reward/judge/overlong": float(sum(self.overlong)),
        }


class GenerativeJudge:
    """``config`` is ``reward_model.judge`` (:class:`~verl.workers.config.reward_model.GenerativeJudgeConfig`)."""

    def __init__(self, config: Any, client: JudgeClient):
        if config.max_score <= config.min_score:
            raise ValueError(
                f"reward_model.judge.max_score={config.max_score} must exceed min_score={config.min_score}"
            )
        self.config = config
        self.client = client
        self.parser = get_judgment_parser(config.parser)

    def rating_to_score(self, rating: float | None) -> float | None:
        """The score of a parsed rating, or None when it is missing or out of range."""
        config = self.config
        if rating is None or not config.min_score <= rating <= config.max_score:
            return None
        if config.normalize:
            return (rating - config.min_score) / (config.max_score - config.min_score)
        return rating

    def scores_from_judgments(self, judgments: list[str | None]) -> JudgeResult:
        """Parse each judgment (None: the prompt was too long) into a score, counting what could not be parsed."""
        scores, parse_failed, overlong = [], [], []
        for text in judgments:
            score = None if text is None else self.rating_to_score(self.parser(text))
            overlong.append(text is None)
            parse_failed.append(text is not None and score is None)
            scores.append(float(self.config.default_score) if score is None else float(score))
        return JudgeResult(scores, parse_failed, overlong, list(judgments))

    def score(self, samples: list[JudgeSample]) -> JudgeResult:
        """Judge every sample (one client call) and parse the judgments."""
        chats = [judge_messages(s, self.config.prompt_template, self.config.system_prompt) for s in samples]
        return self.scores_from_judgments(self.client.judge(chats) if chats else [])

    def cancel(self) -> None:
        """Stop the call in flight (the client restarts its engine), when the client can."""
        cancel = getattr(self.client, "cancel", None)
        if cancel is not None:
            cancel()

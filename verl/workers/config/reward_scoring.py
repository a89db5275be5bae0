"""How a reward manager calls the reward function (``reward_model.scoring``; this build's addition to verl's keys).

verl calls the reward function in the trainer process: a function that never returns hangs the run, and one that
returns NaN trains on NaN. Here every call runs in a pool of scoring processes with a time limit, and every result
is checked before it becomes a reward.
"""

from __future__ import annotations

from dataclasses import dataclass

from verl.workers.config.base import BaseConfig, bounded_field, choice_field

SCORING_FAILURE_POLICIES = ("raise", "fallback")
"""What a failed reward-function call does: stop the run, or score its samples with ``fallback_score``."""


@dataclass
class RewardScoringConfig(BaseConfig):
    """Time limit and failure policy of the reward function's calls, for every reward manager.

    A call fails when it runs past ``timeout``, raises, kills its process, or returns something other than a finite
    number (``int``, ``float``, ``bool``, a one-element tensor) or a dict whose ``score`` is one; a string such as
    ``"1.0"`` fails too. Failures are counted per step in the metrics ``reward/timeouts`` and ``reward/errors``
    (samples; always reported, 0 when nothing failed).
    """

    timeout: float = bounded_field(300.0, gt=0.0)
    """Seconds one call may take: one sample, or the whole batch for the ``batch`` manager. The process running a
    call past it is killed and replaced, then ``on_error`` applies."""

    on_error: str = choice_field("raise", SCORING_FAILURE_POLICIES)
    """``raise``: stop the run with an error naming the function, the data source, the sample's input and the
    result or traceback (checkpoints already saved stay intact); ``fallback``: the sample scores ``fallback_score``
    and counts in ``reward/timeouts`` or ``reward/errors``."""

    fallback_score: float = 0.0
    """Score of a sample whose call failed, with ``on_error=fallback``."""

    warn_ratio: float = bounded_field(0.1, ge=0.0, le=1.0)
    """With ``on_error=fallback``, print a warning (counts and the first failure) when more than this share of a
    batch's samples failed."""

    num_processes: int | None = bounded_field(None, gt=0)
    """Scoring processes of each reward manager (training and validation have one each); null uses
    ``min(8, CPU count)``. They start on the first call and are reused."""
